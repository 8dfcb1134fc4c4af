/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-perf: time and check the collectives of mscclpp/coll.h, with the
 * flags and the table of nccl-tests.
 *
 *   mscclpp-perf <collective> [flags]
 *   collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv alltoallv
 *
 * Ranks come from the launcher's environment (mscclppCommInitFromEnv:
 * mscclpp-run, mpirun, srun, torchrun). With CUDA compiled in and a device
 * present, each rank uses device localRank % deviceCount, cudaMalloc buffers
 * and its own stream, and is timed with CUDA events; otherwise it runs on the
 * host backend (malloc buffers, NULL stream, wall clock).
 *
 * Correctness (-c 1): before each checked call every rank fills its input
 * from (seed, call number, rank, element index) and poisons the output with
 * the expected value XOR a byte mask that changes every call, so a
 * collective that writes nothing (or writes last call's answer) is caught.
 * Values are chosen per type and operation so that every result is exactly
 * representable whatever the order of reduction:
 *   - copies (allgather, broadcast, alltoall, sendrecv, alltoallv): random bits,
 *     compared bit for bit;
 *   - sum / avg: at each index at most 8 ranks contribute a non-zero value
 *     (all ranks when there are <= 8): integers bounded so that no partial
 *     sum overflows; floating point: integers in [-K, K] with 8K <= 2^(m+1)
 *     (m = mantissa bits: fp8e5m2 {-1,0,1}, fp8e4m3 [-2,2]), so every
 *     partial sum is an exactly representable integer;
 *   - prod: at most 6 ranks per index contribute a factor other than 1:
 *     {1,2} (unsigned), {-2,-1,1,2} (signed), +-{0.5,1,2} (floating point):
 *     products are powers of two (or small integers) that every type holds;
 *   - max / min: random values over the type's range (floating point: any
 *     finite value but -0).
 * Integers, and sum/prod/max/min in floating point, must match exactly.
 * avg in floating point is the one tolerance: the expected value is
 * sum / nranks computed in double and rounded to the type, and the result may
 * differ by 1 ulp of the type (an implementation may divide before, during
 * or after summing). Integer avg is the truncating division of the sum.
 *
 * alltoallv (mscclppAllToAllv): each rank sends `size` bytes in all (the
 * count column: elements), split among the ranks by counts that change
 * every call: rank s sends part[(d - s + shift) mod n] elements to rank d,
 * where the n parts (some 0) of the count and the shift are drawn from
 * --seed for each call, so every rank also receives exactly `count`
 * elements, which are the capacities. The timed calls cycle through up to
 * 1024 such sets (in device memory on a GPU, uploaded before the timing;
 * a CUDA graph's launches repeat the sets of the calls it captured); the
 * checked call has its own, and -c 1 checks recvcounts and rdispls too.
 * busbw counts (n-1)/n of the bytes as for alltoall.
 *
 * The reduce's recvbuff of a non-root rank must be left untouched; in-place
 * positions are those of coll.h (alltoall in place: one buffer is the input
 * and the output). sendrecv's in-place column is N/A (a send and a receive
 * of one group on the same buffer race), as is alltoallv's (refused).
 *
 * Exit status: 0; 1 when a call failed or any #wrong > 0; 2 for bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/system.h"
#include "perf.h"

/* Static: everything stays reachable when a failure exits early. */
static struct ctx g_ctx;

static int addRow(struct ctx* c, const struct row* r) {
  if (c->nrows == c->capRows) {
    size_t cap = c->capRows ? c->capRows * 2 : 64;
    struct row* p = realloc(c->rows, cap * sizeof(*p));
    if (p == NULL) {
      fprintf(stderr, PROG ": out of memory\n");
      return -1;
    }
    c->rows = p;
    c->capRows = cap;
  }
  c->rows[c->nrows++] = *r;
  return 0;
}

static size_t nextSize(const struct opts* o, size_t size) {
  size_t next;
  if (o->stepFactor > 1) {
    if (size == 0) return 1;
    if (size > SIZE_MAX / o->stepFactor) return SIZE_MAX;
    next = size * o->stepFactor;
  } else {
    if (o->stepBytes == 0 || size > SIZE_MAX - o->stepBytes) return SIZE_MAX;
    next = size + o->stepBytes;
  }
  return next;
}

/* --progress: rank 0 tells stderr how far a long run is, because the table
 * alone (stdout, often a file or a pipe) says nothing while one size of one
 * type runs for minutes; at most one line every progressSec seconds. */
struct progress {
  double t0, last; /* seconds: the run's start, the last line */
  int done, total; /* sizes measured, of all (type, op, size) */
};

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progressLine(const struct opts* o, struct progress* pg, int type, int op, size_t size) {
  double now = nowSec();
  if (now - pg->last < o->progressSec && pg->done < pg->total) return;
  if (pg->done == pg->total && pg->last == pg->t0 && o->progressSec > 0) return; /* short run: no line at all */
  pg->last = now;
  fprintf(stderr, PROG ": progress: %d/%d sizes measured (%s%s%s up to %zu B), %.0f s%s\n", pg->done, pg->total,
          typeName(type), colls[o->coll].reduces ? " " : "", colls[o->coll].reduces ? opNames[op] : "", size,
          now - pg->t0, pg->done == pg->total ? ", done" : "");
  fflush(stderr);
}

/* All sizes, types and ops. 0: ran (rows hold #wrong), -1: a call failed. */
static int runAll(struct ctx* c) {
  const struct opts* o = &c->o;
  int nops = colls[o->coll].reduces ? o->nops : 1;
  int nsizes = 0; /* per (type, op) */
  for (size_t size = o->minBytes; size <= o->maxBytes; size = nextSize(o, size)) {
    nsizes++;
    if (size == SIZE_MAX) break;
  }
  struct progress pg = {.t0 = nowSec(), .total = o->ntypes * nops * nsizes};
  pg.last = pg.t0;
  for (int ti = 0; ti < o->ntypes; ti++) {
    for (int oi = 0; oi < nops; oi++) {
      int type = o->typeList[ti], op = colls[o->coll].reduces ? o->opList[oi] : mscclppSum;
      size_t lastBytes = SIZE_MAX;
      for (size_t size = o->minBytes; size <= o->maxBytes; size = nextSize(o, size)) {
        struct row r;
        memset(&r, 0, sizeof(r));
        for (int p = 0; p < 2; p++) {
          struct call k;
          /* --plan: the built-in algorithm (0), then the plan (1), both in the plan's form */
          setupCall(c, size, type, op, o->plan != NULL ? o->planInfo.inplace : p, &k);
          c->usePlan = o->plan != NULL && p == 1;
          if (p == 0) {
            if (k.bytes == lastBytes) break; /* a size that rounds to the last one's count */
            lastBytes = k.bytes;
            r.bytes = k.bytes;
            r.count = k.count;
            r.type = type;
            r.op = op;
            r.root = o->root;
          }
          if (p == 1 && !colls[o->coll].inPlace) continue;
          if (c->usePlan) { /* the plan's message size range (the output's bytes for allgather) */
            uint64_t msg = (uint64_t)(o->coll == C_ALLGATHER ? k.recvElems : k.sendElems) * k.ts;
            if (k.count == 0 || msg < o->planInfo.minMessageBytes || msg > o->planInfo.maxMessageBytes) continue;
          }
          uint64_t t0 = mscclppTraceStart();
          if (measure(c, &k, &r.m[p]) != 0) return -1;
          if (t0 != 0) { /* the measured size in the trace (the public API: detail text, value = bytes) */
            char detail[128];
            snprintf(detail, sizeof(detail), "%s %s %s %s", colls[o->coll].name, typeName(type),
                     colls[o->coll].reduces ? opNames[op] : "-", p ? "in-place" : "out-of-place");
            mscclppTraceEnd(t0, "perf.measure", detail, (uint64_t)k.bytes);
          }
        }
        if (r.m[0].valid) {
          if (c->rank == 0) printRow(c, &r);
          if (addRow(c, &r) != 0) return -1;
        }
        pg.done++;
        if (c->rank == 0) progressLine(o, &pg, type, op, size);
        if (size == SIZE_MAX) break;
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  struct ctx* c = &g_ctx;
  int envRank, envLocal;
  envRanks(&envRank, &envLocal);
  quiet = envRank > 0;
  int pr = parseArgs(argc, argv, &c->o);
  if (pr == -1 && quiet) {
    /* Only rank 0 says what is wrong with the flags (every rank has the same
     * ones). A launcher stops the job when the first rank fails, which could
     * be this one, before rank 0 has printed why: give rank 0 time to fail
     * first. The launcher's stop ends the wait early. */
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
  }
  if (pr != 0) return pr > 0 ? 0 : pr == -2 ? EXIT_FAIL : EXIT_USAGE;
  const struct opts* o = &c->o;
  c->rank = envRank >= 0 ? envRank : 0;

  /* The library reads its parameters when the communicator is made; set
   * before any other thread (CUDA's) could read the environment. */
  /* --plan: the built-in column must be the built-in algorithm, not a
   * plan of the cache directory */
  if (o->plan != NULL) unsetenv("MSCCLPP_CACHE_DIR");
  if (o->tracePath != NULL && setenv("MSCCLPP_TRACE", o->tracePath, 1) != 0) {
    fprintf(stderr, PROG ": rank %d: cannot set MSCCLPP_TRACE: %s\n", c->rank, strerror(errno));
    return EXIT_FAIL;
  }
  if (selectDevice(c) != 0) return EXIT_FAIL;
  mscclppResult_t res = mscclppCommInitFromEnv(&c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommInitFromEnv", res);
    return EXIT_FAIL;
  }
  (void)mscclppCommRank(c->comm, &c->rank);
  (void)mscclppCommSize(c->comm, &c->nranks);
  (void)mscclppCommLocalRank(c->comm, &c->localRank);
  (void)mscclppCommLocalSize(c->comm, &c->localNranks);
  /* Usage errors every rank finds alike: rank 0 says why, and the others
   * wait for it in a barrier before they exit (a launcher stops the job at
   * the first rank that fails, which could otherwise be before rank 0 had
   * printed). */
  if (o->plan != NULL && o->planInfo.nranks != c->nranks) {
    if (c->rank == 0)
      fprintf(stderr, PROG ": --plan %s is for %d ranks; this run has %d\n", o->planPath, o->planInfo.nranks,
              c->nranks);
    (void)mscclppBootstrapBarrier(c->comm);
    (void)mscclppCommDestroy(c->comm);
    return EXIT_USAGE;
  }
  if (o->root >= c->nranks) {
    if (c->rank == 0) fprintf(stderr, PROG ": -r %d is not a rank of 0..%d\n", o->root, c->nranks - 1);
    (void)mscclppBootstrapBarrier(c->comm);
    (void)mscclppCommDestroy(c->comm);
    return EXIT_USAGE;
  }
  if (c->gpu) {
    int count = 1;
    (void)mscclppGetDeviceCount(&count); /* selectDevice found count > 0 */
    if (count < 1) count = 1;
    if (c->localRank % count != c->device)
      fprintf(stderr,
              PROG ": rank %d: warning: the launcher's environment gave no local rank matching this host's "
                   "(%d); using device %d\n",
              c->rank, c->localRank, c->device);
    if (c->localNranks > count && !toolMpsRunning(NULL) && c->localRank == 0)
      fprintf(stderr,
              PROG ": warning: %d ranks share %d GPU%s on this host and no CUDA MPS daemon answers (%s/control): "
                   "without MPS the GPU time-slices between the ranks' processes, so a collective's kernels do "
                   "not run at the same time and every step waits for a context switch; the numbers will be far "
                   "below the hardware's. Run under MPS: mscclpp-run --mps, or nvidia-cuda-mps-control -d.\n",
              c->localNranks, count, count > 1 ? "s" : "",
              getenv("CUDA_MPS_PIPE_DIRECTORY") ? getenv("CUDA_MPS_PIPE_DIRECTORY") : "/tmp/nvidia-mps");
  }
  if (o->graphLaunches > 0 && !c->gpu && c->rank == 0)
    fprintf(stderr, PROG ": -G %d: CUDA graphs need a GPU; the host backend runs the calls directly\n",
            o->graphLaunches);
  int exitCode = EXIT_FAIL;
  struct rankInfo* info = NULL;
  if (createStream(c) != 0) goto fail_destroy_comm;
  c->bufBytes = o->maxBytes + o->offsetElems * 8;
  c->sendBase = allocBuf(c, c->bufBytes);
  c->recvBase = allocBuf(c, c->bufBytes);
  if (c->sendBase == NULL || c->recvBase == NULL) goto fail_free_bufs;
  if (a2avAlloc(c) != 0) goto fail_free_bufs;
  if (o->check) {
    size_t hb = o->maxBytes ? o->maxBytes : 1;
    size_t countBytes = 2 * (size_t)c->nranks * sizeof(size_t); /* alltoallv's counts pass through them too */
    if (hb < countBytes) hb = countBytes;
    c->hImg = malloc(hb);
    c->hExp = malloc(hb);
    c->hOut = malloc(hb);
    if (c->hImg == NULL || c->hExp == NULL || c->hOut == NULL) {
      fprintf(stderr, PROG ": rank %d: cannot allocate 3 x %zu bytes of host memory for the checks\n", c->rank, hb);
      goto fail_free_bufs;
    }
  }
  if (printHeader(c, &info) != 0) goto fail_free_bufs;
  if (runAll(c) != 0) goto fail_free_bufs;

  /* footer */
  int64_t totalWrong = 0;
  double busSum = 0;
  int busCount = 0;
  for (size_t i = 0; i < c->nrows; i++)
    for (int p = 0; p < 2; p++) {
      const struct meas* m = &c->rows[i].m[p];
      if (!m->valid) continue;
      busSum += m->busbw;
      busCount++;
      if (m->wrong > 0) totalWrong += m->wrong;
    }
  double avgBus = busCount ? busSum / busCount : 0;
  exitCode = totalWrong > 0 ? EXIT_FAIL : 0;
  if (c->rank == 0) {
    if (o->check) printf("# Out of bounds values : %" PRId64 " %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g GB/s\n#\n", avgBus);
    fflush(stdout);
    if (o->jsonPath != NULL) {
      if (writeJson(c, info, avgBus, totalWrong) == 0) printf("# results written to %s (JSON)\n", o->jsonPath);
      else exitCode = EXIT_FAIL;
    }
    if (o->plotPath != NULL) {
      int drawn = writePlot(c);
      if (drawn > 0) printf("# plot drawn in %s\n", o->plotPath);
      else if (drawn < 0) exitCode = EXIT_FAIL;
    }
    fflush(stdout);
  }

fail_free_bufs:
  free(info);
  free(c->hImg);
  free(c->hExp);
  free(c->hOut);
  free(c->rows);
  a2avFree(c);
  freeBuf(c, c->sendBase);
  freeBuf(c, c->recvBase);
  destroyStream(c);
  if (o->plan != NULL) (void)mscclppPlanDestroy(o->plan);
fail_destroy_comm:
  if (c->failed) {
    /* a peer may be stuck in a call we left: exiting closes our sockets, so it
     * learns at once instead of waiting for the timeout */
    return EXIT_FAIL;
  }
  res = mscclppCommDestroy(c->comm);
  if (res != mscclppSuccess) {
    callFailed(c, "mscclppCommDestroy", res);
    return EXIT_FAIL;
  }
  return exitCode;
}
