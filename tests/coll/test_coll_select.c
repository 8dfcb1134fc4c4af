/* SPDX-License-Identifier: MIT */
/*
 * The collective layer's selection table and first-use policy (coll.h,
 * select.h), in one process on one-rank communicators of the host backend:
 *   - MSCCLPP_ALGO naming an algorithm no backend implements for the
 *     collective (broadcast=packet), an unknown collective or a malformed
 *     entry is refused at every call, naming it; a valid choice runs, and a
 *     changed value is read again.
 *   - MSCCLPP_DEBUG=INFO: a collective says what it chose once per size
 *     class, not per call.
 *   - First use: the first call's setup fails (the soft RLIMIT_FSIZE below
 *     the size of the scratch's memory file: ftruncate fails, an ordinary
 *     failure the library meets in the field when a limit or a full
 *     /dev/shm refuses memory, with no hook inside the library); the next
 *     calls fail cleanly (mscclppInvalidUsage naming the earlier failure,
 *     never half-built state), and the communicator is destroyed cleanly.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "comm/comm.h"
#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

static mscclppComm_t makeComm(void) {
  mscclppUniqueId id;
  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppGetUniqueId(&id), mscclppSuccess);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 1, id, 0), mscclppSuccess);
  return comm;
}

static void setAlgo(mscclppComm_t comm, const char* algo) {
  snprintf(comm->params.algo, sizeof(comm->params.algo), "%s", algo);
}

static void testAlgoRefused(void) {
  mscclppComm_t comm = makeComm();
  if (comm == NULL) return;
  float in[64], out[64 * 1];
  for (int i = 0; i < 64; i++) in[i] = (float)i;
  /* a name no backend implements for the collective */
  setAlgo(comm, "broadcast=packet");
  CHECK_RES(mscclppAllGather(in, out, 64, mscclppFloat32, comm, NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "broadcast has no algorithm \"packet\"") != NULL);
  /* ... refused for every collective while it is set, send/recv included */
  CHECK_RES(mscclppAllReduce(in, out, 64, mscclppFloat32, mscclppSum, comm, NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppSend(in, 64, mscclppFloat32, 0, comm, NULL), mscclppInvalidArgument);
  setAlgo(comm, "broadcast=packet2");
  CHECK_RES(mscclppBroadcast(in, out, 64, mscclppFloat32, 0, comm, NULL), mscclppInvalidArgument);
  /* all-to-all-v has no port family */
  setAlgo(comm, "alltoallv=port");
  CHECK_RES(mscclppAllGather(in, out, 64, mscclppFloat32, comm, NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "alltoallv has no algorithm \"port\"") != NULL);
  setAlgo(comm, "allgahter=direct");
  CHECK_RES(mscclppAllGather(in, out, 64, mscclppFloat32, comm, NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "unknown collective \"allgahter\"") != NULL);
  setAlgo(comm, "allreduce");
  CHECK_RES(mscclppAllReduce(in, out, 64, mscclppFloat32, mscclppSum, comm, NULL), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "is not collective=algorithm") != NULL);
  /* every name mscclppCollAlgoNames lists is accepted (the host backend
   * runs its own algorithm whatever is forced) */
  setAlgo(comm, "allgather=direct,allreduce=rsag,sendrecv=port,reducescatter=packet,alltoall=packet");
  memset(out, 0, sizeof(out));
  CHECK_RES(mscclppAllGather(in, out, 64, mscclppFloat32, comm, NULL), mscclppSuccess);
  CHECK(memcmp(in, out, sizeof(in)) == 0);
  CHECK_RES(mscclppAllReduce(in, out, 64, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(strcmp(mscclppCollAlgoNames("allgather"), "packet,direct,port,plan") == 0);
  CHECK(strcmp(mscclppCollAlgoNames("reducescatter"), "packet,direct,port,plan") == 0);
  CHECK(strcmp(mscclppCollAlgoNames("alltoall"), "packet,direct,port,plan") == 0);
  CHECK(strcmp(mscclppCollAlgoNames("broadcast"), "direct,port") == 0);
  CHECK(strstr(mscclppCollAlgoNames("allreduce"), "packet") != NULL);
  CHECK(mscclppCollAlgoNames("allgahter") == NULL);
  CHECK(strcmp(mscclppCollAlgoNames("alltoallv"), "direct") == 0);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
}

/* Lines of `path` that contain `what`. */
static int countLines(const char* path, const char* what) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, what) != NULL;
  fclose(f);
  return n;
}

static void testInfoOncePerSizeClass(void) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/mscclpp_test_coll_select_%d.log", (int)getpid());
  unlink(path);
  setenv("MSCCLPP_DEBUG", "INFO", 1);
  setenv("MSCCLPP_DEBUG_SUBSYS", "COLL", 1);
  setenv("MSCCLPP_DEBUG_FILE", path, 1);
  mscclppComm_t comm = makeComm();
  unsetenv("MSCCLPP_DEBUG");
  unsetenv("MSCCLPP_DEBUG_SUBSYS");
  unsetenv("MSCCLPP_DEBUG_FILE");
  if (comm == NULL) return;
  static float in[4096], out[4096];
  /* 4000 and 4096 bytes: one class, (2 KiB, 4 KiB]; 4100 bytes the next */
  for (int i = 0; i < 3; i++) CHECK_RES(mscclppAllReduce(in, out, 1000, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppAllReduce(in, out, 1024, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(countLines(path, "allreduce of ") == 1);
  CHECK(countLines(path, "(2 KiB, 4 KiB]") == 1);
  CHECK_RES(mscclppAllReduce(in, out, 1025, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppAllReduce(in, out, 1025, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(countLines(path, "allreduce of ") == 2);
  CHECK(countLines(path, "host backend") == 2);
  /* another collective: its own classes */
  CHECK_RES(mscclppAllGather(in, out, 1000, mscclppFloat32, comm, NULL), mscclppSuccess);
  CHECK(countLines(path, "allgather of ") == 1);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  unlink(path);
}

static void testFailedFirstSetup(void) {
  mscclppComm_t comm = makeComm();
  if (comm == NULL) return;
  static float in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (float)i;
  /* The host backend's scratch is a memory file of at least 4 KiB per
   * peer (1 MiB by default): a file size limit of 1 KiB fails its
   * ftruncate. SIGXFSZ ignored: the call returns EFBIG instead. */
  struct rlimit saved, low;
  CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  low = saved;
  low.rlim_cur = 1024;
  void (*oldHandler)(int) = signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &low) == 0);
  mscclppResult_t first = mscclppAllReduce(in, out, 256, mscclppFloat32, mscclppSum, comm, NULL);
  CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
  signal(SIGXFSZ, oldHandler);
  CHECK(first == mscclppSystemError);
  /* the next calls fail at once and say why; none touches half-built state */
  CHECK_RES(mscclppAllReduce(in, out, 256, mscclppFloat32, mscclppSum, comm, NULL), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "failed at an earlier call") != NULL);
  CHECK(strstr(mscclppGetLastError(), "ftruncate") != NULL);
  CHECK_RES(mscclppAllGather(in, out, 256, mscclppFloat32, comm, NULL), mscclppInvalidUsage);
  CHECK_RES(mscclppSend(in, 256, mscclppFloat32, 0, comm, NULL), mscclppInvalidUsage);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  /* a new communicator is unaffected */
  comm = makeComm();
  if (comm == NULL) return;
  memset(out, 0, sizeof(out));
  CHECK_RES(mscclppAllReduce(in, out, 256, mscclppFloat32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(memcmp(in, out, sizeof(in)) == 0);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
}

int main(void) {
  RUN(testAlgoRefused);
  RUN(testInfoOncePerSizeClass);
  RUN(testFailedFirstSetup);
  return harnessFinish();
}
