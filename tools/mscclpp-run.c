/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-run: start N local ranks of a command and watch them.
 *
 *   mscclpp-run -n N [options] [--] command args...
 *
 * Each rank gets MSCCLPP_COMM_ID (127.0.0.1:<free port>, or --comm-id),
 * MSCCLPP_COMM_SECRET (32 fresh random hex digits), MSCCLPP_RANK,
 * MSCCLPP_NRANKS, MSCCLPP_LOCAL_RANK and MSCCLPP_LOCAL_NRANKS; values of these
 * variables inherited from the caller are replaced, because one launcher run
 * is one job. Each rank runs in its own process group (so stopping a rank
 * stops what it started) and gets SIGTERM if the launcher dies.
 *
 * Output: each line a rank writes to stdout or stderr is written to the same
 * stream of the launcher with "[rank] " in front (a partial last line is
 * completed with a newline; a line longer than 64 KiB is cut). The launcher
 * never holds a rank's line back; a rank's own stdio buffers a pipe fully,
 * so a program that wants its lines to appear as they happen flushes them.
 *
 * Ending: when a rank fails (non-zero exit or a signal) the others get
 * SIGTERM, then SIGKILL after the grace period, and the launcher exits with
 * the failed rank's status (128 + signal for a signal). SIGINT, SIGTERM and
 * SIGHUP sent to the launcher are forwarded to every rank (a second one sends
 * SIGKILL); the launcher then exits with 128 + that signal. --timeout ends the
 * run with status 124. All waits of the launcher itself are bounded.
 *
 * --report: the ranks get MSCCLPP_REPORT=1 (src/core/report.h) and the
 * launcher reads their hang reports from their output (tools/run/). When a
 * rank reports a failed wait, when a rank fails, at --timeout, and when the
 * launcher gets SIGUSR1, it sends SIGUSR1 to every running rank that catches
 * it (a rank that does not, by /proc/PID/status, would die of it), waits up
 * to REPORT_WAIT_SECONDS for their reports (stopping ranks only after that)
 * and prints one diagnosis; and once more at the end if reports came after.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/system.h"
#include "mscclpp/core.h"
#include "run/report.h"

#define PROG "mscclpp-run"
#define MAX_RANKS 1024
#define LINE_BYTES 65536
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 127
#define EXIT_NOT_EXECUTABLE 126
#define EXIT_TIMEOUT 124
/* After SIGKILL a process normally disappears at once; one stuck in the
 * kernel (uninterruptible I/O, a wedged driver) is given this long. */
#define KILL_WAIT_SECONDS 10.0
#define MPS_WAIT_SECONDS 20.0
/* --report: how long the ranks asked for a report have to answer */
#define REPORT_WAIT_SECONDS 1.5

extern char** environ;

struct options {
  int nranks;
  int prefix;
  int keepGoing;
  double timeout; /* 0: none */
  double grace;
  int mps;
  int report;
  const char* commId; /* NULL: 127.0.0.1:<free port> */
  char** command;
};

struct stream {
  int fd;      /* our read end; -1 once closed */
  int outFd;   /* 1 or 2 */
  char* buf;   /* the incomplete line so far */
  size_t len;
};

struct rank {
  pid_t pid;
  int running;
  int code; /* exit code, or 128 + signal */
  struct stream out, err;
};

enum stopReason { STOP_NONE = 0, STOP_FAILURE, STOP_TIMEOUT, STOP_SIGNAL };

static int signalPipe[2] = {-1, -1};
static int outputBroken[3]; /* a write to fd 1 or 2 failed with EPIPE: drop further output */
static struct runReports* reports; /* --report: what the ranks reported; NULL without it */
static int reportWanted;           /* ask every rank (a failed wait, a failure, --timeout, SIGUSR1) */
static int reportAsked;            /* the ranks were asked at least once */

static void usage(FILE* f) {
  fprintf(f,
          "usage: " PROG " -n N [options] [--] command [args...]\n"
          "Starts N ranks of command on this host and watches them.\n"
          "\n"
          "  -n, --nranks N   number of ranks (1..%d)\n"
          "  --no-prefix      do not prefix output lines with \"[rank] \" (ranks write to the\n"
          "                   launcher's stdout and stderr directly)\n"
          "  --keep-going     when a rank fails, let the others run to the end; exit with\n"
          "                   the first failure's status\n"
          "  --timeout S      stop all ranks after S seconds and exit with status 124\n"
          "  --grace S        seconds between SIGTERM and SIGKILL when stopping ranks (default 3)\n"
          "  --report         hang reports: the ranks get MSCCLPP_REPORT=1; when a rank's wait\n"
          "                   fails, a rank fails, at --timeout, or when the launcher gets\n"
          "                   SIGUSR1, every rank is asked (SIGUSR1) for its state and one\n"
          "                   diagnosis is printed (which rank is not in which call)\n"
          "  --comm-id A      root address ip:port given to the ranks (default 127.0.0.1 and a\n"
          "                   free port)\n"
          "  --mps            start the CUDA MPS control daemon for the run unless one is\n"
          "                   running (CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY, default\n"
          "                   /tmp/mps and /tmp/mpslog), and stop it at the end if we started it\n"
          "  -h, --help       this text\n"
          "\n"
          "Each rank gets MSCCLPP_COMM_ID, MSCCLPP_COMM_SECRET (random), MSCCLPP_RANK,\n"
          "MSCCLPP_NRANKS, MSCCLPP_LOCAL_RANK and MSCCLPP_LOCAL_NRANKS (inherited values are\n"
          "replaced). Rank 0's stdin is the launcher's unless that is a terminal; the other\n"
          "ranks read /dev/null.\n"
          "Exit status: 0 when every rank exits 0; a failed rank's status (128+signal for a\n"
          "signal); 124 on --timeout; 128+signal when the launcher is interrupted; 2 for bad\n"
          "usage; 126/127 when the command cannot be run.\n",
          MAX_RANKS);
}

/* ---- small helpers ------------------------------------------------------ */

static void onSignal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t r = write(signalPipe[1], &b, 1); /* full pipe: a byte is already pending, which is enough */
  (void)r;
  errno = saved;
}

static int parseSeconds(const char* opt, const char* text, int allowZero, double* out) {
  char* end = NULL;
  errno = 0;
  double v = text ? strtod(text, &end) : 0;
  if (text == NULL) {
    fprintf(stderr, PROG ": %s needs a value: a number of seconds %s\n", opt, allowZero ? ">= 0" : "> 0");
    return -1;
  }
  if (errno != 0 || end == text || *end != '\0' || v != v || v < 0 || (v == 0 && !allowZero) || v > 1e9) {
    fprintf(stderr, PROG ": %s needs a number of seconds %s, not \"%s\"\n", opt, allowZero ? ">= 0" : "> 0",
            text ? text : "");
    return -1;
  }
  *out = v;
  return 0;
}

/* Write all of buf to fd (blocking, EINTR/EAGAIN-safe, each wait bounded). A
 * closed reader (EPIPE) turns further output to that fd into a no-op. */
static void writeAll(int fd, const char* buf, size_t len) {
  if (outputBroken[fd]) return;
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 1000) <= 0 && errno != EINTR) {
          /* The reader has not taken anything for a second; keep trying but
           * do not spin. */
        }
        continue;
      }
      outputBroken[fd] = 1;
      return;
    }
    buf += w;
    len -= (size_t)w;
  }
}

/* Absolute or relative path of the program `name` would run, as execvp
 * finds it. Returns 0, or EXIT_NOT_FOUND / EXIT_NOT_EXECUTABLE. */
static int resolveCommand(const char* name, char* path, size_t size) {
  if (name[0] == '\0') return EXIT_NOT_FOUND;
  struct stat st;
  if (strchr(name, '/') != NULL) {
    if (stat(name, &st) != 0) return EXIT_NOT_FOUND;
    if (S_ISDIR(st.st_mode) || access(name, X_OK) != 0) return EXIT_NOT_EXECUTABLE;
    snprintf(path, size, "%s", name);
    return 0;
  }
  const char* dirs = getenv("PATH");
  if (dirs == NULL) dirs = "/usr/local/bin:/usr/bin:/bin";
  int sawNonExecutable = 0;
  while (1) {
    const char* colon = strchr(dirs, ':');
    size_t n = colon ? (size_t)(colon - dirs) : strlen(dirs);
    char cand[PATH_MAX];
    int len = n == 0 ? snprintf(cand, sizeof(cand), "%s", name)
                     : snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, dirs, name);
    if (len > 0 && (size_t)len < sizeof(cand) && stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (access(cand, X_OK) == 0) {
        snprintf(path, size, "%s", cand);
        return 0;
      }
      sawNonExecutable = 1;
    }
    if (colon == NULL) break;
    dirs = colon + 1;
  }
  return sawNonExecutable ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
}

/* 1 when a TCP socket can bind 127.0.0.1:port right now (port 0: any;
 * *bound gets the port). */
static int tryBind(int port, int* bound) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  socklen_t len = sizeof(a);
  int ok = bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr*)&a, &len) == 0;
  int e = errno;
  close(fd);
  errno = e;
  if (ok) *bound = ntohs(a.sin_port);
  return ok;
}

/* A TCP port on 127.0.0.1 that nobody listens on right now. Rank 0 binds it
 * a moment later; another process could take it in between, which the
 * ranks report as a bind failure. To make that unlikely the port is drawn
 * below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where
 * the outgoing connections of other processes -- the usual takers, e.g.
 * the tests that CI runs in parallel -- never get their local port; only
 * a listener that picks the same number could. Falls back to a port the
 * kernel picks. */
static int pickFreePort(int* port) {
  int lo = 32768;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    int a = 0, b = 0;
    if (fscanf(f, "%d %d", &a, &b) == 2 && a > 0) lo = a;
    fclose(f);
  }
  const int first = 10000; /* above the well-known and most registered services */
  if (lo - first >= 1000) {
    uint8_t rnd[2 * 16];
    if (toolRandomBytes(rnd, sizeof(rnd)) == 0) {
      for (int i = 0; i < 16; i++) {
        int p = first + (int)(((unsigned)rnd[2 * i] << 8 | rnd[2 * i + 1]) % (unsigned)(lo - first));
        if (tryBind(p, port)) return 0;
      }
    }
  }
  return tryBind(0, port) ? 0 : -1;
}

/* Wait for pid for at most `seconds`; 1 and *status when it ended, 0 if not. */
static int waitPidBounded(pid_t pid, double seconds, int* status) {
  toolDeadline d = toolDeadlineIn(seconds);
  while (1) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return 1;
    if (r < 0 && errno != EINTR) return 0;
    if (toolDeadlinePassed(d)) return 0;
    poll(NULL, 0, 10);
  }
}

/* ---- CUDA MPS ------------------------------------------------------------ */

/* The GPUs here, as the library sees them (0 when it cannot say). */
static int deviceCount(void) {
  int n = 0;
  return mscclppGetDeviceCount(&n) == mscclppSuccess ? n : 0;
}


/* The pipe directory in use: CUDA_MPS_PIPE_DIRECTORY, else the system
 * default /tmp/nvidia-mps when a daemon runs there, else /tmp/mps. */
static const char* mpsPipeDir(void) {
  const char* d = getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (d != NULL && d[0] != '\0') return d;
  if (toolMpsRunning("/tmp/nvidia-mps")) return "/tmp/nvidia-mps";
  return "/tmp/mps";
}

/* Run nvidia-cuda-mps-control with the given stdin text (NULL: /dev/null)
 * and arguments; its exit code, or -1 if it could not run or did not end. */
static int runMpsControl(const char* controlPath, const char* input, const char* arg) {
  int in[2] = {-1, -1};
  if (input != NULL && pipe2(in, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    if (input != NULL) {
      close(in[0]);
      close(in[1]);
    }
    return -1;
  }
  if (pid == 0) {
    int fd = input != NULL ? in[0] : open("/dev/null", O_RDONLY);
    if (fd >= 0) dup2(fd, 0);
    signal(SIGPIPE, SIG_DFL); /* ignored in the launcher; the daemon should not inherit that */
    char* argv[] = {(char*)controlPath, (char*)arg, NULL};
    execv(controlPath, argv);
    _exit(127);
  }
  if (input != NULL) {
    close(in[0]);
    writeAll(in[1], input, strlen(input));
    close(in[1]);
  }
  int status = 0;
  if (!waitPidBounded(pid, MPS_WAIT_SECONDS, &status)) {
    kill(pid, SIGKILL);
    waitPidBounded(pid, KILL_WAIT_SECONDS, &status);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Start the MPS daemon unless one runs. *started says whether we did.
 * Returns 0, or an exit status for the launcher. */
static int mpsStart(char* controlPath, size_t size, int* started) {
  *started = 0;
  const char* pipeDir = mpsPipeDir();
  const char* logDir = getenv("CUDA_MPS_LOG_DIRECTORY");
  if (logDir == NULL || logDir[0] == '\0') logDir = strcmp(pipeDir, "/tmp/nvidia-mps") == 0 ? "/var/log/nvidia-mps" : "/tmp/mpslog";
  setenv("CUDA_MPS_PIPE_DIRECTORY", pipeDir, 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", logDir, 1);
  if (toolMpsRunning(pipeDir)) {
    fprintf(stderr, PROG ": --mps: using the MPS daemon already running at %s\n", pipeDir);
    return 0;
  }
  int rc = resolveCommand("nvidia-cuda-mps-control", controlPath, size);
  if (rc != 0) {
    fprintf(stderr, PROG ": --mps: nvidia-cuda-mps-control not found in PATH (it comes with the NVIDIA driver)\n");
    return rc;
  }
  if ((mkdir(pipeDir, 0755) != 0 && errno != EEXIST) || (mkdir(logDir, 0755) != 0 && errno != EEXIST)) {
    fprintf(stderr, PROG ": --mps: cannot create %s or %s: %s\n", pipeDir, logDir, strerror(errno));
    return 1;
  }
  rc = runMpsControl(controlPath, NULL, "-d");
  if (rc != 0) {
    fprintf(stderr, PROG ": --mps: '%s -d' failed (status %d); see %s/control.log\n", controlPath, rc, logDir);
    return 1;
  }
  toolDeadline d = toolDeadlineIn(MPS_WAIT_SECONDS);
  while (!toolMpsRunning(pipeDir)) {
    if (toolDeadlinePassed(d)) {
      fprintf(stderr, PROG ": --mps: the MPS daemon did not answer on %s/control within %.0f s; see %s/control.log\n",
              pipeDir, MPS_WAIT_SECONDS, logDir);
      runMpsControl(controlPath, "quit\n", NULL);
      return 1;
    }
    poll(NULL, 0, 20);
  }
  *started = 1;
  fprintf(stderr, PROG ": --mps: started the MPS daemon (pipes %s, logs %s)\n", pipeDir, logDir);
  return 0;
}

/* "quit" returns before the daemon is gone; wait for it (bounded), so that
 * a run started right after ours does not find a daemon on its way out. */
static void mpsStop(const char* controlPath) {
  int rc = runMpsControl(controlPath, "quit\n", NULL);
  if (rc != 0) {
    fprintf(stderr, PROG ": --mps: stopping the MPS daemon failed (status %d)\n", rc);
    return;
  }
  const char* pipeDir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  toolDeadline d = toolDeadlineIn(MPS_WAIT_SECONDS);
  while (pipeDir != NULL && toolMpsRunning(pipeDir)) {
    if (toolDeadlinePassed(d)) {
      fprintf(stderr, PROG ": --mps: the MPS daemon still answers %.0f s after 'quit'\n", MPS_WAIT_SECONDS);
      return;
    }
    poll(NULL, 0, 20);
  }
}

/* ---- options --------------------------------------------------------------- */

/* The value of the option at argv[*i] whose name is `nameLen` characters
 * long: "--name=V", "-nV" or the next argument ("--name V"). NULL if none. */
static const char* optionValue(int argc, char** argv, int* i, size_t nameLen) {
  const char* arg = argv[*i];
  if (arg[nameLen] == '=') return arg + nameLen + 1;
  if (arg[nameLen] != '\0') return arg + nameLen;
  if (*i + 1 >= argc) return NULL;
  return argv[++*i];
}

/* 1 when arg is option `name`, alone or followed by "=value". */
static int isOption(const char* arg, const char* name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

static int parseRanks(const char* opt, const char* v, int* out) {
  if (v == NULL) {
    fprintf(stderr, PROG ": %s needs a value: the number of ranks, an integer in 1..%d\n", opt, MAX_RANKS);
    return -1;
  }
  char* end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n <= 0 || n > MAX_RANKS) {
    fprintf(stderr, PROG ": the number of ranks must be an integer in 1..%d, not \"%s\"\n", MAX_RANKS, v ? v : "");
    return -1;
  }
  *out = (int)n;
  return 0;
}

/* --comm-id ip:port: checked here, where the mistake is one line, rather
 * than by every rank's bootstrap after they all started. */
static int parseCommId(const char* v) {
  if (v == NULL) {
    fprintf(stderr, PROG ": --comm-id needs a value: the root's address ip:port\n");
    return -1;
  }
  const char* colon = strrchr(v, ':');
  if (colon == NULL || colon == v || colon[1] == '\0' || strlen(v) >= 240) {
    fprintf(stderr, PROG ": --comm-id needs an address ip:port, not \"%s\"\n", v);
    return -1;
  }
  char* end = NULL;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (errno != 0 || *end != '\0' || colon[1] == '-' || colon[1] == '+' || port < 1 || port > 65535) {
    fprintf(stderr, PROG ": --comm-id \"%s\": the port \"%s\" is not in 1..65535\n", v, colon + 1);
    return -1;
  }
  return 0;
}

/* Returns -1 to go on, or the status to exit with. */
static int parseOptions(int argc, char** argv, struct options* o) {
  memset(o, 0, sizeof(*o));
  o->nranks = -1;
  o->prefix = 1;
  o->grace = 3.0;
  int i = 1;
  for (; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break; /* the command */
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if (strncmp(a, "-n", 2) == 0 && strncmp(a, "--", 2) != 0) {
      if (parseRanks("-n", optionValue(argc, argv, &i, 2), &o->nranks) != 0) return EXIT_USAGE;
    } else if (isOption(a, "--nranks")) {
      if (parseRanks("--nranks", optionValue(argc, argv, &i, 8), &o->nranks) != 0) return EXIT_USAGE;
    } else if (strcmp(a, "--no-prefix") == 0) {
      o->prefix = 0;
    } else if (strcmp(a, "--keep-going") == 0) {
      o->keepGoing = 1;
    } else if (strcmp(a, "--mps") == 0) {
      o->mps = 1;
    } else if (strcmp(a, "--report") == 0) {
      o->report = 1;
    } else if (isOption(a, "--timeout")) {
      const char* v = optionValue(argc, argv, &i, 9);
      if (parseSeconds("--timeout", v, 0, &o->timeout) != 0) return EXIT_USAGE;
    } else if (isOption(a, "--grace")) {
      const char* v = optionValue(argc, argv, &i, 7);
      if (parseSeconds("--grace", v, 1, &o->grace) != 0) return EXIT_USAGE;
    } else if (isOption(a, "--comm-id")) {
      const char* v = optionValue(argc, argv, &i, 9);
      if (parseCommId(v) != 0) return EXIT_USAGE;
      o->commId = v;
    } else {
      fprintf(stderr, PROG ": unknown option \"%s\" (see " PROG " --help)\n", a);
      return EXIT_USAGE;
    }
  }
  if (o->nranks < 0) {
    fprintf(stderr, PROG ": -n N is required (see " PROG " --help)\n");
    return EXIT_USAGE;
  }
  if (i >= argc) {
    fprintf(stderr, PROG ": no command given (see " PROG " --help)\n");
    return EXIT_USAGE;
  }
  if (o->report && !o->prefix) {
    fprintf(stderr, PROG ": --report reads the ranks' output, which --no-prefix does not pass through the launcher\n");
    return EXIT_USAGE;
  }
  o->command = argv + i;
  return -1;
}

/* ---- ranks ----------------------------------------------------------------- */

static const char* const ownedVars[] = {"MSCCLPP_COMM_ID=", "MSCCLPP_COMM_SECRET=", "MSCCLPP_RANK=",
                                        "MSCCLPP_NRANKS=",  "MSCCLPP_LOCAL_RANK=", "MSCCLPP_LOCAL_NRANKS="};
#define N_OWNED (sizeof(ownedVars) / sizeof(ownedVars[0]))

/* The environment of rank r: the launcher's, minus the variables we own,
 * plus ours. Built before fork (the child only calls async-signal-safe
 * functions). The strings live in `storage`. */
static char** buildEnv(const char* commId, const char* secret, int r, int nranks, char storage[N_OWNED][320]) {
  size_t n = 0;
  while (environ[n] != NULL) n++;
  char** env = calloc(n + N_OWNED + 1, sizeof(char*));
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int owned = 0;
    for (size_t j = 0; j < N_OWNED; j++)
      if (strncmp(environ[i], ownedVars[j], strlen(ownedVars[j])) == 0) owned = 1;
    if (!owned) env[k++] = environ[i];
  }
  snprintf(storage[0], 320, "MSCCLPP_COMM_ID=%s", commId);
  snprintf(storage[1], 320, "MSCCLPP_COMM_SECRET=%s", secret);
  snprintf(storage[2], 320, "MSCCLPP_RANK=%d", r);
  snprintf(storage[3], 320, "MSCCLPP_NRANKS=%d", nranks);
  snprintf(storage[4], 320, "MSCCLPP_LOCAL_RANK=%d", r);
  snprintf(storage[5], 320, "MSCCLPP_LOCAL_NRANKS=%d", nranks);
  for (size_t j = 0; j < N_OWNED; j++) env[k++] = storage[j];
  env[k] = NULL;
  return env;
}

static void childFail(const char* what) {
  /* async-signal-safe: write and _exit only (strerror of a known errno reads a table) */
  int code = errno == EACCES || errno == ENOEXEC ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
  const char* e = strerror(errno);
  ssize_t r = write(2, PROG ": ", sizeof(PROG ": ") - 1);
  r = write(2, what, strlen(what));
  r = write(2, ": ", 2);
  r = write(2, e, strlen(e));
  r = write(2, "\n", 1);
  (void)r;
  _exit(code);
}

/* In the child: set up and exec. Never returns. */
static void execRank(const char* path, char** argv, char** env, int inFd, int outFd, int errFd, pid_t launcher) {
  setpgid(0, 0);
  if (inFd >= 0 && inFd != 0) dup2(inFd, 0);
  if (outFd >= 0) dup2(outFd, 1);
  if (errFd >= 0) dup2(errFd, 2);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* The rank must not outlive a launcher killed with SIGKILL. */
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) childFail("prctl(PR_SET_PDEATHSIG)");
  if (getppid() != launcher) _exit(EXIT_NOT_FOUND);
  execve(path, argv, env);
  childFail(argv[0]);
}

static void signalRank(struct rank* r, int sig) {
  if (!r->running) return;
  /* The group holds what the rank started; the pid covers a rank that left it. */
  kill(-r->pid, sig);
  kill(r->pid, sig);
}

/* 1 when the process catches `sig` (its SigCgt mask in /proc): a rank
 * without the report's handler would die of SIGUSR1. */
static int catchesSignal(pid_t pid, int sig) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  int caught = 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "SigCgt:", 7) == 0) {
      unsigned long long mask = strtoull(line + 7, NULL, 16);
      caught = (mask >> (sig - 1)) & 1u;
      break;
    }
  fclose(f);
  return caught;
}

/* --report: ask every running rank that catches SIGUSR1 for its report. */
static void askReports(struct rank* ranks, int nranks) {
  runReportsAsk(reports);
  for (int r = 0; r < nranks; r++) {
    if (!ranks[r].running || !catchesSignal(ranks[r].pid, SIGUSR1)) continue;
    runReportsExpect(reports, r);
    kill(ranks[r].pid, SIGUSR1);
  }
}

/* ---- output forwarding ------------------------------------------------------- */

static void emit(struct stream* s, int rank, const char* line, size_t len, int addNewline) {
  /* a failed wait asks every rank once; later ones are in the final diagnosis */
  if (reports != NULL && runReportsLine(reports, rank, line, len) == 2 && !reportAsked) reportWanted = 1;
  char head[24];
  int hl = snprintf(head, sizeof(head), "[%d] ", rank);
  /* One write per line keeps lines of different ranks apart. */
  char* tmp = malloc((size_t)hl + len + 1);
  if (tmp == NULL) {
    writeAll(s->outFd, head, (size_t)hl);
    writeAll(s->outFd, line, len);
    if (addNewline) writeAll(s->outFd, "\n", 1);
    return;
  }
  memcpy(tmp, head, (size_t)hl);
  memcpy(tmp + hl, line, len);
  size_t total = (size_t)hl + len;
  if (addNewline) tmp[total++] = '\n';
  writeAll(s->outFd, tmp, total);
  free(tmp);
}

static void streamClose(struct stream* s, int rank) {
  if (s->fd < 0) return;
  if (s->len > 0) emit(s, rank, s->buf, s->len, 1);
  s->len = 0;
  close(s->fd);
  s->fd = -1;
}

/* Read what is there; forward complete lines. Returns 1 at EOF. */
static int streamRead(struct stream* s, int rank) {
  while (s->fd >= 0) {
    ssize_t n = read(s->fd, s->buf + s->len, LINE_BYTES - s->len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      streamClose(s, rank);
      return 1;
    }
    if (n == 0) {
      streamClose(s, rank);
      return 1;
    }
    s->len += (size_t)n;
    size_t start = 0;
    for (size_t i = s->len - (size_t)n; i < s->len; i++) {
      if (s->buf[i] == '\n') {
        emit(s, rank, s->buf + start, i + 1 - start, 0);
        start = i + 1;
      }
    }
    if (start > 0) {
      memmove(s->buf, s->buf + start, s->len - start);
      s->len -= start;
    }
    if (s->len == LINE_BYTES) { /* a line longer than the buffer: cut it */
      emit(s, rank, s->buf, s->len, 1);
      s->len = 0;
    }
  }
  return 1;
}

static int openStream(struct stream* s, int outFd, int* childEnd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
  s->fd = p[0];
  s->outFd = outFd;
  s->len = 0;
  s->buf = malloc(LINE_BYTES);
  if (s->buf == NULL) {
    close(p[0]);
    close(p[1]);
    s->fd = -1;
    errno = ENOMEM;
    return -1;
  }
  *childEnd = p[1];
  return 0;
}

static const char* signalName(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return strsignal(sig);
  }
}

static void describeStatus(int status, char* buf, size_t size, int* code) {
  if (WIFEXITED(status)) {
    *code = WEXITSTATUS(status);
    snprintf(buf, size, "exited with status %d", *code);
  } else {
    int sig = WTERMSIG(status);
    *code = 128 + sig;
    snprintf(buf, size, "was killed by signal %d (%s)", sig, strsignal(sig));
  }
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char** argv) {
  struct options o;
  int rc = parseOptions(argc, argv, &o);
  if (rc >= 0) return rc;

  char path[PATH_MAX];
  rc = resolveCommand(o.command[0], path, sizeof(path));
  if (rc == EXIT_NOT_FOUND) {
    fprintf(stderr, PROG ": %s: command not found\n", o.command[0]);
    return rc;
  }
  if (rc == EXIT_NOT_EXECUTABLE) {
    fprintf(stderr, PROG ": %s: not an executable file\n", o.command[0]);
    return rc;
  }

  /* Enough descriptors for two pipes per rank. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(2 * o.nranks + 64)) {
    rl.rlim_cur = rl.rlim_max < (rlim_t)(2 * o.nranks + 64) ? rl.rlim_max : (rlim_t)(2 * o.nranks + 64);
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  char commId[256];
  if (o.commId != NULL) {
    snprintf(commId, sizeof(commId), "%s", o.commId);
  } else {
    int port = 0;
    if (pickFreePort(&port) != 0) {
      fprintf(stderr, PROG ": cannot find a free TCP port on 127.0.0.1: %s\n", strerror(errno));
      return 1;
    }
    snprintf(commId, sizeof(commId), "127.0.0.1:%d", port);
  }
  uint8_t secretBytes[16];
  char secret[33];
  if (toolRandomBytes(secretBytes, sizeof(secretBytes)) != 0) {
    fprintf(stderr, PROG ": cannot read random bytes for the job secret: %s\n", strerror(errno));
    return 1;
  }
  toolHexEncode(secretBytes, sizeof(secretBytes), secret);

  /* Signals arrive as bytes on a pipe that poll() watches. Installed before
   * MPS starts, so that an early SIGINT still ends in the loop below, which
   * stops what we started. */
  if (pipe2(signalPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  for (size_t i = 0; i < sizeof(caught) / sizeof(caught[0]); i++) sigaction(caught[i], &sa, NULL);
  if (o.report) {
    reports = runReportsCreate(o.nranks);
    if (reports == NULL) {
      fprintf(stderr, PROG ": out of memory\n");
      return 1;
    }
    sigaction(SIGUSR1, &sa, NULL);
    setenv("MSCCLPP_REPORT", "1", 1);
  }
  signal(SIGPIPE, SIG_IGN);

  char mpsControl[PATH_MAX];
  int mpsStarted = 0;
  if (o.mps) {
    if (deviceCount() == 0) {
      fprintf(stderr, PROG ": --mps: no GPU found; not starting MPS\n");
    } else {
      rc = mpsStart(mpsControl, sizeof(mpsControl), &mpsStarted);
      if (rc != 0) return rc;
    }
  } else if (o.nranks > 1) {
    int gpus = deviceCount();
    if (gpus > 0 && o.nranks > gpus && !toolMpsRunning(mpsPipeDir()))
      fprintf(stderr,
              PROG ": warning: %d ranks share %d GPU%s without CUDA MPS: their kernels time-slice and run slowly, "
              "and kernels that wait for each other can stall; use --mps\n",
              o.nranks, gpus, gpus == 1 ? "" : "s");
  }

  struct rank* ranks = calloc((size_t)o.nranks, sizeof(struct rank));
  struct pollfd* pfds = calloc((size_t)(2 * o.nranks + 1), sizeof(struct pollfd));
  struct stream** pstreams = calloc((size_t)(2 * o.nranks + 1), sizeof(struct stream*));
  int* prank = calloc((size_t)(2 * o.nranks + 1), sizeof(int));
  if (ranks == NULL || pfds == NULL || pstreams == NULL || prank == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    if (mpsStarted) mpsStop(mpsControl);
    return 1;
  }
  for (int r = 0; r < o.nranks; r++) ranks[r].out.fd = ranks[r].err.fd = -1;

  int devNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int stdinIsTty = isatty(0);
  pid_t self = getpid();
  enum stopReason stop = STOP_NONE;
  int stopSignal = 0;
  int exitCode = 0;
  int firstFailure = -1; /* rank */
  toolDeadline timeoutAt = toolDeadlineIn(o.timeout > 0 ? o.timeout : 2e9);
  toolDeadline killAt = {UINT64_MAX}; /* SIGKILL the remaining ranks then */
  toolDeadline giveUpAt = {UINT64_MAX};
  int killed = 0;
  int running = 0;
  /* --report: a round of reports asked for, and a stop that waits for it */
  int asking = 0;
  toolDeadline askUntil = {UINT64_MAX};
  enum stopReason delayedStop = STOP_NONE;

  /* ---- start ---- */
  for (int r = 0; r < o.nranks; r++) {
    int outW = -1, errW = -1;
    if (o.prefix &&
        (openStream(&ranks[r].out, 1, &outW) != 0 || openStream(&ranks[r].err, 2, &errW) != 0)) {
      fprintf(stderr, PROG ": cannot create pipes for rank %d: %s\n", r, strerror(errno));
      if (outW >= 0) close(outW);
      stop = STOP_FAILURE;
      exitCode = 1;
      break;
    }
    char storage[N_OWNED][320];
    char** env = buildEnv(commId, secret, r, o.nranks, storage);
    pid_t pid = env ? fork() : -1;
    if (pid == 0) execRank(path, o.command, env, r == 0 && !stdinIsTty ? 0 : devNull, outW, errW, self);
    int e = errno;
    free(env);
    if (outW >= 0) close(outW);
    if (errW >= 0) close(errW);
    if (pid < 0) {
      fprintf(stderr, PROG ": cannot start rank %d: %s\n", r, strerror(e));
      streamClose(&ranks[r].out, r);
      streamClose(&ranks[r].err, r);
      stop = STOP_FAILURE;
      exitCode = 1;
      break;
    }
    setpgid(pid, pid); /* also in the child: whichever runs first */
    ranks[r].pid = pid;
    ranks[r].running = 1;
    running++;
  }
  if (stop != STOP_NONE) {
    for (int r = 0; r < o.nranks; r++) signalRank(&ranks[r], SIGTERM);
    killAt = toolDeadlineIn(o.grace);
  }

  /* ---- watch ---- */
  int openStreams = 0;
  while (1) {
    int np = 0;
    pfds[np] = (struct pollfd){.fd = signalPipe[0], .events = POLLIN};
    pstreams[np++] = NULL;
    openStreams = 0;
    for (int r = 0; r < o.nranks; r++) {
      struct stream* ss[2] = {&ranks[r].out, &ranks[r].err};
      for (int k = 0; k < 2; k++) {
        if (ss[k]->fd < 0) continue;
        openStreams++;
        pfds[np] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
        prank[np] = r;
        pstreams[np++] = ss[k];
      }
    }
    if (running == 0 && openStreams == 0) break;

    int waitMs = 1000; /* also a safety net: reap even if a SIGCHLD byte was lost */
    if (stop == STOP_NONE && o.timeout > 0) {
      int t = toolDeadlineRemainingMs(timeoutAt);
      if (t < waitMs) waitMs = t;
    }
    if (killAt.ns != UINT64_MAX && !killed) {
      int t = toolDeadlineRemainingMs(killAt);
      if (t < waitMs) waitMs = t;
    }
    if (asking) {
      int t = toolDeadlineRemainingMs(askUntil);
      if (t < waitMs) waitMs = t;
    }
    int n = poll(pfds, (nfds_t)np, waitMs);
    if (n < 0 && errno != EINTR) {
      fprintf(stderr, PROG ": poll: %s\n", strerror(errno));
      break;
    }

    /* Signals sent to the launcher. */
    unsigned char sigs[64];
    ssize_t ns;
    while ((ns = read(signalPipe[0], sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < ns; i++) {
        int sig = sigs[i];
        if (sig == SIGCHLD) continue;
        if (sig == SIGUSR1) { /* --report only: asked for a report now */
          reportWanted = 1;
          continue;
        }
        if (stop == STOP_NONE) {
          fprintf(stderr, PROG ": received %s; forwarding it to the ranks\n", signalName(sig));
          stop = STOP_SIGNAL;
          stopSignal = sig;
          for (int r = 0; r < o.nranks; r++) signalRank(&ranks[r], sig);
          killAt = toolDeadlineIn(o.grace);
        } else if (!killed) {
          fprintf(stderr, PROG ": received %s again; killing the ranks\n", signalName(sig));
          killAt = toolDeadlineIn(0);
        }
      }
    }

    /* Output. */
    for (int i = 1; i < np; i++)
      if (pfds[i].revents != 0) streamRead(pstreams[i], prank[i]);

    /* Ranks that ended. */
    for (int r = 0; r < o.nranks; r++) {
      if (!ranks[r].running) continue;
      int status = 0;
      pid_t w = waitpid(ranks[r].pid, &status, WNOHANG);
      if (w != ranks[r].pid) continue;
      ranks[r].running = 0;
      running--;
      /* Everything it wrote is in the pipes now; forward it before we talk. A
       * process it left behind may still hold the pipes: do not wait for it. */
      streamRead(&ranks[r].out, r);
      streamRead(&ranks[r].err, r);
      streamClose(&ranks[r].out, r);
      streamClose(&ranks[r].err, r);
      char what[128];
      int code = 0;
      describeStatus(status, what, sizeof(what), &code);
      ranks[r].code = code;
      if (code == 0 || stop != STOP_NONE) continue;
      if (firstFailure < 0) {
        firstFailure = r;
        exitCode = code;
      }
      if (o.keepGoing) {
        fprintf(stderr, PROG ": rank %d %s\n", r, what);
      } else if (reports != NULL && delayedStop == STOP_NONE) {
        fprintf(stderr, PROG ": rank %d %s; asking the ranks for their reports, then stopping them\n", r, what);
        delayedStop = STOP_FAILURE;
        if (!asking) reportWanted = 1;
      } else if (reports == NULL) {
        fprintf(stderr, PROG ": rank %d %s; stopping the other ranks\n", r, what);
        stop = STOP_FAILURE;
        for (int q = 0; q < o.nranks; q++) signalRank(&ranks[q], SIGTERM);
        killAt = toolDeadlineIn(o.grace);
      }
    }

    /* --report: ask, then diagnose when every rank asked has answered. */
    if (reports != NULL && reportWanted && !asking && stop == STOP_NONE) {
      reportWanted = 0;
      askReports(ranks, o.nranks);
      reportAsked = 1;
      asking = 1;
      askUntil = toolDeadlineIn(REPORT_WAIT_SECONDS);
    }
    if (asking && (runReportsAnswered(reports) || toolDeadlinePassed(askUntil))) {
      asking = 0;
      runReportsDiagnose(reports, stderr, PROG ": ");
    }
    if (delayedStop != STOP_NONE && !asking && stop == STOP_NONE) {
      stop = delayedStop;
      if (running > 0) fprintf(stderr, PROG ": stopping the other ranks\n");
      for (int q = 0; q < o.nranks; q++) signalRank(&ranks[q], SIGTERM);
      killAt = toolDeadlineIn(o.grace);
    }

    /* Deadlines. */
    if (stop == STOP_NONE && delayedStop == STOP_NONE && o.timeout > 0 && running > 0 &&
        toolDeadlinePassed(timeoutAt)) {
      if (reports != NULL) {
        fprintf(stderr, PROG ": timeout: %d rank%s still running after %g s; asking for their reports, then "
                "stopping them\n", running, running == 1 ? "" : "s", o.timeout);
        delayedStop = STOP_TIMEOUT;
        if (!asking) reportWanted = 1;
        continue;
      }
      fprintf(stderr, PROG ": timeout: %d rank%s still running after %g s; stopping them\n", running,
              running == 1 ? "" : "s", o.timeout);
      stop = STOP_TIMEOUT;
      for (int r = 0; r < o.nranks; r++) signalRank(&ranks[r], SIGTERM);
      killAt = toolDeadlineIn(o.grace);
    }
    if (!killed && running > 0 && toolDeadlinePassed(killAt)) {
      char list[256] = "";
      size_t used = 0;
      for (int r = 0; r < o.nranks; r++) {
        if (!ranks[r].running) continue;
        if (used < sizeof(list) - 16) used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? "," : "", r);
        signalRank(&ranks[r], SIGKILL);
      }
      fprintf(stderr, PROG ": rank%s %s still running %g s after SIGTERM; sent SIGKILL\n", running == 1 ? "" : "s", list,
              o.grace);
      killed = 1;
      giveUpAt = toolDeadlineIn(KILL_WAIT_SECONDS);
    }
    if (killed && running > 0 && toolDeadlinePassed(giveUpAt)) {
      fprintf(stderr, PROG ": %d rank%s did not exit %g s after SIGKILL (stuck in the kernel?); giving up on them\n",
              running, running == 1 ? "" : "s", KILL_WAIT_SECONDS);
      break;
    }
  }

  for (int r = 0; r < o.nranks; r++) {
    streamClose(&ranks[r].out, r);
    streamClose(&ranks[r].err, r);
    free(ranks[r].out.buf);
    free(ranks[r].err.buf);
  }
  if (reports != NULL && runReportsFresh(reports)) runReportsDiagnose(reports, stderr, PROG ": ");
  runReportsDestroy(reports);
  reports = NULL;
  if (mpsStarted) mpsStop(mpsControl);

  if (stop == STOP_SIGNAL) exitCode = 128 + stopSignal;
  else if (stop == STOP_TIMEOUT) exitCode = EXIT_TIMEOUT;
  else if (exitCode == 0 && running > 0) exitCode = 1; /* gave up on stuck ranks */
  free(ranks);
  free(pfds);
  free(pstreams);
  free(prank);
  if (devNull >= 0) close(devNull);
  return exitCode;
}
