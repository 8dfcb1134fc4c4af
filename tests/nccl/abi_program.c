/* SPDX-License-Identifier: MIT */
/*
 * ABI check of libmscclpp_nccl.so against NVIDIA's nccl.h. This one file is
 * compiled twice: against NVIDIA's nccl.h (the CUDA toolkit's) and against
 * ours (src/nccl/nccl.h). Both builds print the same facts (version macros,
 * enum values, ncclConfig_t's size and field offsets, the initializer's
 * values, the other structs' sizes): test_abi.sh compares the two outputs
 * line by line. The NVIDIA build then runs a 1-rank job through whatever
 * library the loader gave it (linked, linked in place of libnccl.so.2, or
 * LD_PRELOADed) and says which library that was.
 *
 *   abi_program facts     print the facts
 *   abi_program run       run the job; print "library: <path>"
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#define FACT(expr) printf("%s = %lld\n", #expr, (long long)(expr))

static void facts(void) {
  FACT(NCCL_MAJOR);
  FACT(NCCL_MINOR);
  FACT(NCCL_PATCH);
  FACT(NCCL_VERSION_CODE);
  FACT(NCCL_VERSION(2, 28, 9));
  FACT(NCCL_VERSION(2, 8, 4));
  FACT(NCCL_UNIQUE_ID_BYTES);
  FACT(sizeof(ncclUniqueId));
  FACT(NCCL_SPLIT_NOCOLOR);
  FACT(NCCL_CONFIG_UNDEF_INT);
  FACT(NCCL_WIN_DEFAULT);
  FACT(NCCL_WIN_COLL_SYMMETRIC);
  FACT(NCCL_WIN_REQUIRED_ALIGNMENT);
  FACT(NCCL_CTA_POLICY_DEFAULT);
  FACT(NCCL_CTA_POLICY_EFFICIENCY);
  FACT(NCCL_CTA_POLICY_ZERO);
  FACT(NCCL_SHRINK_DEFAULT);
  FACT(NCCL_SHRINK_ABORT);
  FACT(NCCL_REVOKE_DEFAULT);
  /* results */
  FACT(ncclSuccess);
  FACT(ncclUnhandledCudaError);
  FACT(ncclSystemError);
  FACT(ncclInternalError);
  FACT(ncclInvalidArgument);
  FACT(ncclInvalidUsage);
  FACT(ncclRemoteError);
  FACT(ncclInProgress);
  FACT(ncclNumResults);
  FACT(sizeof(ncclResult_t));
  /* operators */
  FACT(ncclSum);
  FACT(ncclProd);
  FACT(ncclMax);
  FACT(ncclMin);
  FACT(ncclAvg);
  FACT(ncclNumOps);
  FACT(ncclMaxRedOp);
  FACT(sizeof(ncclRedOp_t));
  /* types */
  FACT(ncclInt8);
  FACT(ncclChar);
  FACT(ncclUint8);
  FACT(ncclInt32);
  FACT(ncclInt);
  FACT(ncclUint32);
  FACT(ncclInt64);
  FACT(ncclUint64);
  FACT(ncclFloat16);
  FACT(ncclHalf);
  FACT(ncclFloat32);
  FACT(ncclFloat);
  FACT(ncclFloat64);
  FACT(ncclDouble);
  FACT(ncclBfloat16);
  FACT(ncclFloat8e4m3);
  FACT(ncclFloat8e5m2);
  FACT(ncclNumTypes);
  FACT(sizeof(ncclDataType_t));
  FACT(ncclScalarDevice);
  FACT(ncclScalarHostImmediate);
  FACT(sizeof(ncclScalarResidence_t));
  /* ncclConfig_t, field by field, and its initializer */
  FACT(sizeof(ncclConfig_t));
  FACT(offsetof(ncclConfig_t, size));
  FACT(offsetof(ncclConfig_t, magic));
  FACT(offsetof(ncclConfig_t, version));
  FACT(offsetof(ncclConfig_t, blocking));
  FACT(offsetof(ncclConfig_t, cgaClusterSize));
  FACT(offsetof(ncclConfig_t, minCTAs));
  FACT(offsetof(ncclConfig_t, maxCTAs));
  FACT(offsetof(ncclConfig_t, netName));
  FACT(offsetof(ncclConfig_t, splitShare));
  FACT(offsetof(ncclConfig_t, trafficClass));
  FACT(offsetof(ncclConfig_t, commName));
  FACT(offsetof(ncclConfig_t, collnetEnable));
  FACT(offsetof(ncclConfig_t, CTAPolicy));
  FACT(offsetof(ncclConfig_t, shrinkShare));
  FACT(offsetof(ncclConfig_t, nvlsCTAs));
  FACT(offsetof(ncclConfig_t, nChannelsPerNetPeer));
  FACT(offsetof(ncclConfig_t, nvlinkCentricSched));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  const unsigned char* bytes = (const unsigned char*)&cfg;
  printf("NCCL_CONFIG_INITIALIZER bytes =");
  for (size_t i = 0; i < sizeof(cfg); i++) printf(" %02x", bytes[i]);
  printf("\n");
  FACT(sizeof(ncclSimInfo_t));
  FACT(offsetof(ncclSimInfo_t, estimatedTime));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  FACT(sim.size);
  FACT(sim.magic);
  FACT(sim.version);
  FACT((long long)(sim.estimatedTime * 1000));
}

#define RUN_CHECK(expr)                                                                                      \
  do {                                                                                                       \
    ncclResult_t r_ = (expr);                                                                                \
    if (r_ != ncclSuccess && r_ != ncclInProgress) {                                                         \
      fprintf(stderr, "%s failed: %d %s: %s\n", #expr, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                              \
    }                                                                                                        \
  } while (0)

static int runJob(void) {
  Dl_info info;
  if (dladdr((void*)ncclGetVersion, &info) == 0 || info.dli_fname == NULL) {
    fprintf(stderr, "dladdr(ncclGetVersion) failed\n");
    return 1;
  }
  printf("library: %s\n", info.dli_fname);
  /* which libraries named like NCCL are mapped */
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  while (maps != NULL && fgets(line, sizeof(line), maps) != NULL) {
    char* p = strchr(line, '/');
    if (p != NULL && strstr(p, "nccl") != NULL && strstr(line, "r-xp") != NULL) printf("mapped: %s", p);
  }
  if (maps != NULL) fclose(maps);
  int version = 0;
  RUN_CHECK(ncclGetVersion(&version));
  printf("version: %d\n", version);
  ncclUniqueId id;
  RUN_CHECK(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "abi";
  ncclComm_t comm = NULL;
  RUN_CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  ncclResult_t st = ncclInProgress;
  for (int i = 0; i < 30000 && st == ncclInProgress; i++) {
    RUN_CHECK(ncclCommGetAsyncError(comm, &st));
    if (st == ncclInProgress) usleep(1000);
  }
  RUN_CHECK(st);
  int count = 0, rank = -1;
  RUN_CHECK(ncclCommCount(comm, &count));
  RUN_CHECK(ncclCommUserRank(comm, &rank));
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  cudaStream_t stream = 0;
  RUN_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, stream));
  RUN_CHECK(ncclGroupStart());
  RUN_CHECK(ncclSend(x, 4, ncclFloat32, 0, comm, stream));
  RUN_CHECK(ncclRecv(y, 4, ncclFloat32, 0, comm, stream));
  RUN_CHECK(ncclGroupEnd());
  RUN_CHECK(ncclCommFinalize(comm));
  RUN_CHECK(ncclCommDestroy(comm));
  int ok = count == 1 && rank == 0 && y[3] == 4 && version == NCCL_VERSION_CODE;
  printf("job: count %d rank %d y[3] %g: %s\n", count, rank, (double)y[3], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "facts") == 0) {
    facts();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "run") == 0) return runJob();
  fprintf(stderr, "usage: abi_program facts | run\n");
  return 2;
}
