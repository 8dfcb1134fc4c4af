/* SPDX-License-Identifier: MIT */
/* Unit tests of the core layer: status strings, last error, parameters,
 * logging configuration, SipHash, hex, deadlines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "core/util.h"
#include "harness.h"

static void testErrorStrings(void) {
  for (int r = 0; r < mscclppNumResults; r++) {
    const char* s = mscclppGetErrorString((mscclppResult_t)r);
    CHECK(s != NULL && strlen(s) > 0 && strcmp(s, "unknown result") != 0);
  }
  CHECK(strcmp(mscclppGetErrorString((mscclppResult_t)1234), "unknown result") == 0);
  CHECK(strcmp(mscclppGetErrorString(mscclppTimeout), "timeout") == 0);
  CHECK(mscclppTimeout == 8 && mscclppAborted == 9 && mscclppRemoteError == 6);
}

static void testLastError(void) {
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  CHECK_RES(mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "value %d is bad", 42), mscclppInvalidArgument);
  CHECK(strcmp(mscclppGetLastError(), "value 42 is bad") == 0);
  CHECK_RES(mscclppGetVersion(NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "NULL") != NULL);
  int v = 0;
  CHECK_RES(mscclppGetVersion(&v), mscclppSuccess);
  CHECK(v == MSCCLPP_VERSION);
}

static void testParams(void) {
  struct mscclppParams p;
  unsetenv("MSCCLPP_TIMEOUT");
  unsetenv("MSCCLPP_FIFO_SIZE");
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  CHECK(p.timeout == 30.0);
  CHECK(p.fifoSize == 16384);
  setenv("MSCCLPP_TIMEOUT", "2.5", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  CHECK(p.timeout == 2.5);
  setenv("MSCCLPP_TIMEOUT", "abc", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_TIMEOUT") != NULL);
  CHECK(p.timeout == 2.5); /* outputs untouched on failure */
  setenv("MSCCLPP_TIMEOUT", "-1", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  unsetenv("MSCCLPP_TIMEOUT");
  setenv("MSCCLPP_FIFO_SIZE", "100", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "power of two") != NULL);
  unsetenv("MSCCLPP_FIFO_SIZE");
  setenv("MSCCLPP_COLL_P2P_ZERO_COPY_MIN", "-1", 1); /* once taken as 0 without a word */
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_COLL_P2P_ZERO_COPY_MIN") != NULL);
  setenv("MSCCLPP_COLL_P2P_ZERO_COPY_MIN", "0", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  CHECK(p.collP2pZeroCopyMin == 0);
  unsetenv("MSCCLPP_COLL_P2P_ZERO_COPY_MIN");
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  CHECK(p.collP2pLlMax == 65536);
  setenv("MSCCLPP_COLL_P2P_LL_MAX", "-1", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_COLL_P2P_LL_MAX") != NULL);
  setenv("MSCCLPP_COLL_P2P_LL_MAX", "0", 1); /* the packet path off */
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  CHECK(p.collP2pLlMax == 0);
  unsetenv("MSCCLPP_COLL_P2P_LL_MAX");
  char longStr[400];
  memset(longStr, 'x', sizeof(longStr) - 1);
  longStr[sizeof(longStr) - 1] = '\0';
  setenv("MSCCLPP_SOCKET_IFNAME", longStr, 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppInvalidArgument);
  unsetenv("MSCCLPP_SOCKET_IFNAME");

  int n = mscclppParamCount();
  CHECK(n > 5);
  int sawTimeout = 0;
  for (int i = 0; i < n; i++) {
    mscclppParamInfo info;
    CHECK_RES(mscclppParamGetInfo(i, &info), mscclppSuccess);
    CHECK(strncmp(info.name, "MSCCLPP_", 8) == 0);
    CHECK(strlen(info.help) > 0);
    if (strcmp(info.name, "MSCCLPP_TIMEOUT") == 0) sawTimeout = strcmp(info.type, "float") == 0;
  }
  CHECK(sawTimeout);
  mscclppParamInfo info;
  CHECK_RES(mscclppParamGetInfo(n, &info), mscclppInvalidArgument);
  CHECK_RES(mscclppParamGetInfo(-1, &info), mscclppInvalidArgument);
  CHECK_RES(mscclppParamGetInfo(0, NULL), mscclppInvalidArgument);

  /* the environment checked as a communicator would read it (mscclpp-info) */
  CHECK_RES(mscclppParamsCheck(), mscclppSuccess);
  setenv("MSCCLPP_FIFO_SIZE", "lots", 1);
  CHECK_RES(mscclppParamsCheck(), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "MSCCLPP_FIFO_SIZE=\"lots\"") != NULL);
  unsetenv("MSCCLPP_FIFO_SIZE");
  CHECK_RES(mscclppParamsCheck(), mscclppSuccess);
}

/* core.h's network description: its arguments, and parameters that do not
 * parse said in the buffer (what it finds is mscclpp-info's test). */
static void testNetDescription(void) {
  char buf[512];
  CHECK_RES(mscclppGetNetDescription(NULL, sizeof(buf)), mscclppInvalidArgument);
  CHECK_RES(mscclppGetNetDescription(buf, 0), mscclppInvalidArgument);
  setenv("MSCCLPP_TIMEOUT", "soon", 1);
  buf[0] = '\0';
  CHECK_RES(mscclppGetNetDescription(buf, sizeof(buf)), mscclppInvalidArgument);
  CHECK(strstr(buf, "MSCCLPP_TIMEOUT") != NULL);
  unsetenv("MSCCLPP_TIMEOUT");
  buf[0] = '\0';
  (void)mscclppGetNetDescription(buf, sizeof(buf)); /* a provider, or why there is none: a line either way */
  CHECK(buf[0] != '\0');
  char tiny[8];
  (void)mscclppGetNetDescription(tiny, sizeof(tiny)); /* cut to fit */
  CHECK(strlen(tiny) < sizeof(tiny));
}

/* The whole of a log file (up to len - 1 bytes, NUL-terminated); 0 when
 * it cannot be read. */
static int readLog(const char* path, char* buf, size_t len, size_t* n) {
  buf[0] = '\0';
  *n = 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  *n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[*n] = '\0';
  return 1;
}

static void testLogging(void) {
  char path[256], expanded[300];
  snprintf(path, sizeof(path), "/tmp/mscclpp-log-test-%d-%%p.txt", (int)getpid());
  snprintf(expanded, sizeof(expanded), "/tmp/mscclpp-log-test-%d-%d.txt", (int)getpid(), (int)getpid());
  unlink(expanded);
  setenv("MSCCLPP_DEBUG", "INFO", 1);
  setenv("MSCCLPP_DEBUG_SUBSYS", "^NET", 1);
  setenv("MSCCLPP_DEBUG_FILE", path, 1);
  struct mscclppParams p;
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  mscclppLogConfigure(&p);
  mscclppLogSetRank(7);
  CHECK(mscclppLogEnabled(MSCCLPP_LOG_LEVEL_INFO, MSCCLPP_LOG_INIT));
  CHECK(!mscclppLogEnabled(MSCCLPP_LOG_LEVEL_INFO, MSCCLPP_LOG_NET));
  CHECK(!mscclppLogEnabled(MSCCLPP_LOG_LEVEL_TRACE, MSCCLPP_LOG_INIT));
  MSCCLPP_INFO(MSCCLPP_LOG_INIT, "hello %d", 123);
  MSCCLPP_INFO(MSCCLPP_LOG_NET, "must not appear");
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  unsetenv("MSCCLPP_DEBUG_FILE");
  unsetenv("MSCCLPP_DEBUG_SUBSYS");
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  mscclppLogConfigure(&p); /* closes the file */
  char buf[4096];
  size_t n = 0;
  CHECK(readLog(expanded, buf, sizeof(buf), &n));
  {
    CHECK(strstr(buf, "hello 123") != NULL);
    CHECK(strstr(buf, "[7] MSCCLPP INFO INIT") != NULL);
    CHECK(strstr(buf, "must not appear") == NULL);
    char pid[32];
    snprintf(pid, sizeof(pid), ":%d:", (int)getpid());
    CHECK(strstr(buf, pid) != NULL);
  }
  unlink(expanded);
  CHECK(!mscclppLogEnabled(MSCCLPP_LOG_LEVEL_WARN, MSCCLPP_LOG_INIT));
}

/* Log once: a reason is logged where it is decided; wrapping it with the
 * caller's context, or returning it again later, changes the last error
 * and logs nothing more. */
static void testErrWrap(void) {
  char path[256];
  snprintf(path, sizeof(path), "/tmp/mscclpp-wrap-test-%d.txt", (int)getpid());
  unlink(path);
  setenv("MSCCLPP_DEBUG", "WARN", 1);
  setenv("MSCCLPP_DEBUG_FILE", path, 1);
  struct mscclppParams p;
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  mscclppLogConfigure(&p);
  CHECK_RES(mscclppErr(mscclppRemoteError, MSCCLPP_LOG_NET, "peer %d hung up", 3), mscclppRemoteError);
  CHECK(!mscclppLastErrorShown()); /* logged to the file, not to stderr */
  CHECK_RES(mscclppErrWrap(mscclppRemoteError, MSCCLPP_LOG_COLL, "allreduce on rank %d", 1), mscclppRemoteError);
  CHECK(strcmp(mscclppGetLastError(), "allreduce on rank 1: peer 3 hung up") == 0);
  CHECK_RES(mscclppErrAgain(mscclppAborted, MSCCLPP_LOG_COLL, "later call: %s", mscclppGetLastError()),
            mscclppAborted);
  CHECK(strcmp(mscclppGetLastError(), "later call: allreduce on rank 1: peer 3 hung up") == 0);
  unsetenv("MSCCLPP_DEBUG_FILE");
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  mscclppLogConfigure(&p); /* closes the file */
  char buf[4096];
  size_t n = 0;
  CHECK(readLog(path, buf, sizeof(buf), &n));
  {
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    CHECK(lines == 1);
    CHECK(strstr(buf, "peer 3 hung up (remote process exited") != NULL);
    CHECK(strstr(buf, "allreduce on rank 1") == NULL);
  }
  unlink(path);
  /* stderr at WARN: shown, so a tool need not print it again */
  CHECK_RES(mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "expected WARN line (test_core)"),
            mscclppInvalidArgument);
  CHECK(mscclppLastErrorShown());
  CHECK_RES(mscclppErrAgain(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "again"), mscclppInvalidArgument);
  CHECK(mscclppLastErrorShown());
  setenv("MSCCLPP_DEBUG", "NONE", 1);
  CHECK_RES(mscclppParamsLoad(&p), mscclppSuccess);
  mscclppLogConfigure(&p);
  CHECK_RES(mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "not shown"), mscclppInvalidArgument);
  CHECK(!mscclppLastErrorShown());
  CHECK_RES(mscclppErrAgain(mscclppInvalidArgument, MSCCLPP_LOG_INIT, "not shown again"), mscclppInvalidArgument);
  CHECK(!mscclppLastErrorShown());
}

static void testSipHash(void) {
  /* Reference vector from the SipHash paper: key 00..0f, message 00..0e. */
  uint8_t key[16], msg[15];
  for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
  for (int i = 0; i < 15; i++) msg[i] = (uint8_t)i;
  CHECK(mscclppSipHash(key, msg, 15) == 0xa129ca6149be45e5ull);
  CHECK(mscclppSipHash(key, msg, 0) == 0x726fdb47dd0e0e31ull);
}

static void testHexAndRandom(void) {
  uint8_t a[16], b[16];
  char hex[33];
  CHECK_RES(mscclppRandomBytes(a, sizeof(a)), mscclppSuccess);
  mscclppHexEncode(a, sizeof(a), hex);
  CHECK(strlen(hex) == 32);
  CHECK_RES(mscclppHexDecode(hex, b, sizeof(b)), mscclppSuccess);
  CHECK(memcmp(a, b, 16) == 0);
  CHECK_RES(mscclppHexDecode("zz", b, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppHexDecode("abc", b, 1), mscclppInvalidArgument);
}

static void testDeadline(void) {
  mscclppDeadline d = mscclppDeadlineIn(0.05);
  CHECK(!mscclppDeadlinePassed(d));
  CHECK(mscclppDeadlineRemainingMs(d) > 0 && mscclppDeadlineRemainingMs(d) <= 50);
  usleep(60000);
  CHECK(mscclppDeadlinePassed(d));
  CHECK(mscclppDeadlineRemainingMs(d) == 0);
  CHECK(mscclppDeadlinePassed(mscclppDeadlineIn(0)));
}

int main(void) {
  RUN(testErrorStrings);
  RUN(testLastError);
  RUN(testParams);
  RUN(testNetDescription);
  RUN(testLogging);
  RUN(testErrWrap);
  RUN(testSipHash);
  RUN(testHexAndRandom);
  RUN(testDeadline);
  return harnessFinish();
}
