/* SPDX-License-Identifier: MIT */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/params.h"

atomic_int mscclppLogLevelState = -1;
atomic_uint mscclppLogSubsysState = MSCCLPP_LOG_ALL;

static pthread_mutex_t logLock = PTHREAD_MUTEX_INITIALIZER;
static FILE* logFile = NULL; /* NULL: stderr */
static char logFilePath[4096];
static char hostName[64];
static _Thread_local int threadRank = -1;

static const struct {
  const char* name;
  unsigned bit;
} subsysNames[] = {
    {"INIT", MSCCLPP_LOG_INIT},   {"BOOTSTRAP", MSCCLPP_LOG_BOOTSTRAP}, {"GPU", MSCCLPP_LOG_GPU},
    {"MEM", MSCCLPP_LOG_MEM},     {"TRANSPORT", MSCCLPP_LOG_TRANSPORT}, {"PROXY", MSCCLPP_LOG_PROXY},
    {"CHANNEL", MSCCLPP_LOG_CHANNEL}, {"COLL", MSCCLPP_LOG_COLL},     {"NET", MSCCLPP_LOG_NET},
    {"NCCL", MSCCLPP_LOG_NCCL},   {"TOOLS", MSCCLPP_LOG_TOOLS},         {"ENV", MSCCLPP_LOG_ENV},
    {"ALL", MSCCLPP_LOG_ALL},
};

void mscclppLogSetRank(int rank) { threadRank = rank; }

static const char* subsysName(unsigned subsys) {
  for (size_t i = 0; i < sizeof(subsysNames) / sizeof(subsysNames[0]); i++)
    if (subsysNames[i].bit == subsys) return subsysNames[i].name;
  return "MULTI";
}

static int parseLevel(const char* s, int* ok) {
  *ok = 1;
  if (s == NULL || *s == '\0') return MSCCLPP_LOG_LEVEL_WARN;
  if (strcasecmp(s, "NONE") == 0) return MSCCLPP_LOG_LEVEL_NONE;
  if (strcasecmp(s, "VERSION") == 0 || strcasecmp(s, "WARN") == 0) return MSCCLPP_LOG_LEVEL_WARN;
  if (strcasecmp(s, "INFO") == 0) return MSCCLPP_LOG_LEVEL_INFO;
  if (strcasecmp(s, "TRACE") == 0) return MSCCLPP_LOG_LEVEL_TRACE;
  *ok = 0;
  return MSCCLPP_LOG_LEVEL_WARN;
}

/* "INIT,NET" selects; "^INIT,NET" excludes. Unknown names set *bad. */
static unsigned parseSubsys(const char* s, const char** bad) {
  *bad = NULL;
  if (s == NULL || *s == '\0') return MSCCLPP_LOG_ALL;
  int invert = 0;
  if (*s == '^') {
    invert = 1;
    s++;
  }
  unsigned mask = 0;
  char buf[MSCCLPP_PARAM_STR_MAX];
  snprintf(buf, sizeof(buf), "%s", s);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (size_t i = 0; i < sizeof(subsysNames) / sizeof(subsysNames[0]); i++) {
      if (strcasecmp(tok, subsysNames[i].name) == 0) {
        mask |= subsysNames[i].bit;
        found = 1;
      }
    }
    if (!found && *bad == NULL) *bad = s;
  }
  return invert ? (MSCCLPP_LOG_ALL & ~mask) : mask;
}

/* Expand %h (host) and %p (pid) in a file name pattern. */
static void expandPath(const char* pattern, char* out, size_t outSize) {
  size_t o = 0;
  for (const char* p = pattern; *p && o + 1 < outSize; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      char tmp[64];
      if (p[1] == 'h')
        snprintf(tmp, sizeof(tmp), "%s", hostName);
      else
        snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
      for (const char* t = tmp; *t && o + 1 < outSize; t++) out[o++] = *t;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

/* Values that came from the NCCL_* aliases (the MSCCLPP_* name unset) are
 * NCCL's vocabulary: names we do not have (NCCL_DEBUG=ABORT, subsystems
 * such as P2P or GRAPH) are ignored without a warning, as the NCCL-compatible
 * library promises. */
static int fromNcclAlias(const char* name) { return getenv(name) == NULL; }

/* The settings are read again for every communicator (and by every launch
 * of the tools' helpers), so a bad value would be reported as often; it is
 * reported once per process, and again only when the value changes. Call with
 * logLock held; returns 1 the first time value is seen in *seen. */
static int firstSeen(char* seen, size_t size, const char* value) {
  if (strncmp(seen, value, size - 1) == 0) return 0;
  snprintf(seen, size, "%s", value);
  return 1;
}

static void configure(const char* level, const char* subsys, const char* file) {
  pthread_mutex_lock(&logLock);
  if (hostName[0] == '\0') {
    if (gethostname(hostName, sizeof(hostName)) != 0) snprintf(hostName, sizeof(hostName), "unknown");
    hostName[sizeof(hostName) - 1] = '\0';
    char* dot = strchr(hostName, '.');
    if (dot) *dot = '\0';
  }
  int levelOk;
  int lvl = parseLevel(level, &levelOk);
  const char* badSubsys;
  unsigned mask = parseSubsys(subsys, &badSubsys);

  char path[sizeof(logFilePath)];
  path[0] = '\0';
  if (file != NULL && *file != '\0') expandPath(file, path, sizeof(path));
  const char* openError = NULL;
  if (strcmp(path, logFilePath) != 0) {
    if (logFile != NULL) fclose(logFile);
    logFile = NULL;
    logFilePath[0] = '\0';
    if (path[0] != '\0') {
      logFile = fopen(path, "a");
      if (logFile == NULL)
        openError = path;
      else
        snprintf(logFilePath, sizeof(logFilePath), "%s", path);
    }
  }
  static char seenLevel[MSCCLPP_PARAM_STR_MAX], seenSubsys[MSCCLPP_PARAM_STR_MAX], seenPath[sizeof(logFilePath)];
  int warnLevel = !levelOk && !fromNcclAlias("MSCCLPP_DEBUG") && firstSeen(seenLevel, sizeof(seenLevel), level);
  int warnSubsys = badSubsys && !fromNcclAlias("MSCCLPP_DEBUG_SUBSYS") &&
                   firstSeen(seenSubsys, sizeof(seenSubsys), badSubsys);
  int warnOpen = openError && firstSeen(seenPath, sizeof(seenPath), openError);
  atomic_store(&mscclppLogSubsysState, mask);
  atomic_store(&mscclppLogLevelState, lvl);
  pthread_mutex_unlock(&logLock);
  if (warnLevel)
    MSCCLPP_WARN(MSCCLPP_LOG_ENV, "MSCCLPP_DEBUG=\"%s\" is not one of NONE, WARN, INFO, TRACE; using WARN", level);
  if (warnSubsys) MSCCLPP_WARN(MSCCLPP_LOG_ENV, "MSCCLPP_DEBUG_SUBSYS=\"%s\" names an unknown subsystem", badSubsys);
  if (warnOpen) MSCCLPP_WARN(MSCCLPP_LOG_ENV, "cannot open MSCCLPP_DEBUG_FILE \"%s\"; logging to stderr", openError);
}

static const char* envOr(const char* name, const char* alias) {
  const char* v = getenv(name);
  if (v == NULL && alias != NULL) v = getenv(alias);
  return v;
}

static void initFromEnv(void) {
  configure(envOr("MSCCLPP_DEBUG", "NCCL_DEBUG"), envOr("MSCCLPP_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS"),
            envOr("MSCCLPP_DEBUG_FILE", "NCCL_DEBUG_FILE"));
}

static pthread_once_t initOnce = PTHREAD_ONCE_INIT;
void mscclppLogInitOnce(void) { pthread_once(&initOnce, initFromEnv); }

void mscclppLogConfigure(const struct mscclppParams* params) {
  pthread_once(&initOnce, initFromEnv);
  /* The snapshot holds defaults for unset variables; keep the NCCL_* aliases. */
  const char* level = getenv("MSCCLPP_DEBUG") ? params->debug : envOr("MSCCLPP_DEBUG", "NCCL_DEBUG");
  const char* subsys =
      getenv("MSCCLPP_DEBUG_SUBSYS") ? params->debugSubsys : envOr("MSCCLPP_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS");
  const char* file = getenv("MSCCLPP_DEBUG_FILE") ? params->debugFile : envOr("MSCCLPP_DEBUG_FILE", "NCCL_DEBUG_FILE");
  configure(level, subsys, file);
}

int mscclppLogToStderr(void) {
  pthread_mutex_lock(&logLock);
  int toStderr = logFile == NULL;
  pthread_mutex_unlock(&logLock);
  return toStderr;
}

void mscclppLogPrint(int level, unsigned subsys, const char* file, int line, const char* fmt, ...) {
  static const char* levelNames[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[2048];
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n = snprintf(msg, sizeof(msg), "%s:%d:%d [%d] MSCCLPP %s %s %s:%d ", hostName, (int)getpid(),
                   (int)syscall(SYS_gettid), threadRank, levelNames[level & 3], subsysName(subsys), base, line);
  if (n < 0) return;
  if ((size_t)n < sizeof(msg)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_lock(&logLock);
  FILE* out = logFile ? logFile : stderr;
  fprintf(out, "%s\n", msg);
  fflush(out);
  pthread_mutex_unlock(&logLock);
}
