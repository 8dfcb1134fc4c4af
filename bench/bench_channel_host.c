/* SPDX-License-Identifier: MIT */
/*
 * Channel ping-pongs on the host backend, 2 ranks (processes), each next to
 * the raw operation timed in the same run:
 *
 *   mscclpp-run -n 2 -- bench_channel_host [iterations]
 *
 *  (r)  raw: a release store of the round number into the peer's flag
 *       through the same shared mapping the channels use, a spin on an
 *       acquire load of the own flag
 *  (1)  port channel putWithSignal of 8 bytes: rank 0 puts+signals, rank 1
 *       waits and answers; each side's proxy thread memcpy's and stores the
 *       signal
 *  (2)  memory channel signal / wait
 *  (3)  memory channel put, 3 threads, vs memcpy, 1 MiB and 64 MiB
 * GPUs are hidden (CUDA_VISIBLE_DEVICES=""). The proxies run only for (1)
 * and (3). In (1) two spinning waiters and two proxy threads share the
 * cores: on a machine with fewer than 4 free cores the port figure is mostly
 * scheduling.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/port_channel.h"

#define OK(expr)                                                                                     \
  do {                                                                                               \
    mscclppResult_t r_ = (expr);                                                                     \
    if (r_ != mscclppSuccess) {                                                                      \
      fprintf(stderr, "%s: %s: %s\n", #expr, mscclppGetErrorString(r_), mscclppGetLastError());      \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BIG (64u << 20)
#define THREADS 3

struct putArgs {
  const mscclppMemoryChannelDeviceHandle* h;
  uint64_t bytes;
  uint32_t tid;
};

static void* putThread(void* arg) {
  struct putArgs* a = arg;
  mscclppMemoryChannelDevicePut(a->h, BIG + 4096, 0, a->bytes, a->tid, THREADS);
  return NULL;
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  mscclppComm_t comm;
  OK(mscclppCommInitFromEnv(&comm));
  int rank, nranks;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (nranks != 2) {
    fprintf(stderr, "bench_channel_host: run with 2 ranks\n");
    return 2;
  }
  const int peer = 1 - rank;
  const size_t total = 2 * (size_t)BIG + 3 * 4096;
  const uint64_t flagOff = 2 * (uint64_t)BIG + 8192;
  void* buf;
  OK(mscclppMemAlloc(comm, mscclppMemKindHostShared, total, &buf));
  mscclppRegisteredMemory_t mem;
  OK(mscclppMemoryRegister(comm, buf, total, mscclppTransportHostShm, &mem));
  mscclppConnection_t conn;
  OK(mscclppConnectionCreate(comm, peer, 1, mscclppTransportHostShm, &conn));
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 2;
  pc.local = mem;
  mscclppPortChannel_t port;
  OK(mscclppPortChannelCreate(comm, conn, &pc, &port));
  mscclppMemoryChannelConfig mc = MSCCLPP_MEMORY_CHANNEL_CONFIG_INITIALIZER;
  mc.tag = 3;
  mc.local = mem;
  mscclppMemoryChannel_t memCh;
  OK(mscclppMemoryChannelCreate(comm, conn, &mc, &memCh));
  mscclppPortChannelDeviceHandle ph;
  mscclppMemoryChannelDeviceHandle mh;
  OK(mscclppPortChannelGetDeviceHandle(port, &ph));
  OK(mscclppMemoryChannelGetDeviceHandle(memCh, &mh));
  /* the proxy spins on a core: run it only for what needs it (1, 3) */
  OK(mscclppCommProxyStop(comm));
  uint64_t* peerFlag = (uint64_t*)(mh.dst + flagOff);
  uint64_t* myFlag = (uint64_t*)(mh.src + flagOff);
  OK(mscclppBootstrapBarrier(comm));

  /* (r) raw */
  double t0 = 0;
  for (int i = 1; i <= iters + 1000; i++) {
    if (i == 1001) t0 = nowSec();
    if (rank == 0) {
      __atomic_store_n(peerFlag, (uint64_t)i, __ATOMIC_RELEASE);
      while (__atomic_load_n(myFlag, __ATOMIC_ACQUIRE) < (uint64_t)i) mscclppSpinPause();
    } else {
      while (__atomic_load_n(myFlag, __ATOMIC_ACQUIRE) < (uint64_t)i) mscclppSpinPause();
      __atomic_store_n(peerFlag, (uint64_t)i, __ATOMIC_RELEASE);
    }
  }
  double rawUs = (nowSec() - t0) / iters * 1e6;
  OK(mscclppBootstrapBarrier(comm));

  /* (2) memory channel */
  for (int i = 0; i < iters + 1000; i++) {
    if (i == 1000) t0 = nowSec();
    if (rank == 0) {
      mscclppMemoryChannelDeviceSignal(&mh);
      OK(mscclppMemoryChannelDeviceWait(&mh));
    } else {
      OK(mscclppMemoryChannelDeviceWait(&mh));
      mscclppMemoryChannelDeviceSignal(&mh);
    }
  }
  double memUs = (nowSec() - t0) / iters * 1e6;
  OK(mscclppBootstrapBarrier(comm));

  /* (1) port channel */
  OK(mscclppCommProxyStart(comm));
  int portIters = iters / 4;
  for (int i = 0; i < portIters + 200; i++) {
    if (i == 200) t0 = nowSec();
    if (rank == 0) {
      OK(mscclppPortChannelDevicePutWithSignal(&ph, ph.dst, BIG + 4096, ph.src, 0, 8));
      OK(mscclppPortChannelDeviceWait(&ph));
    } else {
      OK(mscclppPortChannelDeviceWait(&ph));
      OK(mscclppPortChannelDevicePutWithSignal(&ph, ph.dst, BIG + 4096, ph.src, 0, 8));
    }
  }
  double portUs = (nowSec() - t0) / portIters * 1e6;
  OK(mscclppBootstrapBarrier(comm));

  if (rank == 0) {
    printf("bench_channel_host: 2 ranks, %d ping-pong round trips (%d for the port channel)\n", iters, portIters);
    printf("%-60s %10s %8s\n", "measurement", "value", "vs (r)");
    printf("%-60s %7.3f us %7.2fx\n", "(r) raw flag ping-pong through the shared mapping", rawUs, 1.0);
    printf("%-60s %7.3f us %7.2fx\n", "(1) port channel putWithSignal 8 B ping-pong (round trip)", portUs,
           portUs / rawUs);
    printf("%-60s %7.3f us %7.2fx\n", "(2) memory channel signal/wait ping-pong (round trip)", memUs, memUs / rawUs);
    /* (3) bandwidth, one-sided */
    memcpy(mh.dst + BIG + 4096, mh.src, BIG); /* fault every page in first */
    for (uint64_t bytes = 1u << 20; bytes <= BIG; bytes *= 64) {
      int n = bytes >= BIG ? 5 : 200;
      double a = nowSec();
      for (int i = 0; i < n; i++) memcpy(mh.dst + BIG + 4096, mh.src, bytes);
      double memcpyGBs = (double)bytes * n / (nowSec() - a) / 1e9;
      a = nowSec();
      for (int i = 0; i < n; i++) {
        pthread_t th[THREADS];
        struct putArgs pa[THREADS];
        for (uint32_t t = 0; t < THREADS; t++) {
          pa[t] = (struct putArgs){&mh, bytes, t};
          pthread_create(&th[t], NULL, putThread, &pa[t]);
        }
        for (uint32_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
      }
      double putGBs = (double)bytes * n / (nowSec() - a) / 1e9;
      a = nowSec();
      for (int i = 0; i < n; i++) OK(mscclppPortChannelDevicePut(&ph, ph.dst, BIG + 4096, ph.src, 0, bytes));
      OK(mscclppPortChannelDeviceFlush(&ph));
      double portGBs = (double)bytes * n / (nowSec() - a) / 1e9;
      printf("(3) %5llu MiB: memcpy %6.2f GB/s, memory channel put (%d threads) %6.2f GB/s (%.2fx), port put %6.2f "
             "GB/s (%.2fx)\n",
             (unsigned long long)(bytes >> 20), memcpyGBs, THREADS, putGBs, putGBs / memcpyGBs, portGBs,
             portGBs / memcpyGBs);
    }
    fflush(stdout);
  }
  OK(mscclppBootstrapBarrier(comm));
  OK(mscclppPortChannelDestroy(port));
  OK(mscclppMemoryChannelDestroy(memCh));
  OK(mscclppConnectionDestroy(conn));
  OK(mscclppBootstrapBarrier(comm));
  OK(mscclppMemoryDeregister(mem));
  OK(mscclppMemFree(comm, buf));
  OK(mscclppCommDestroy(comm));
  return 0;
}
