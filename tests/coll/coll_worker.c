/* SPDX-License-Identifier: MIT */
/*
 * One rank of the collective tests on the host backend, started by
 * mscclpp-run (GPUs hidden, so this runs the host backend anywhere):
 *
 *   coll_worker matrix [maxBytes]
 *       every collective x type x operator x in/out-of-place, counts 0, 1
 *       and primes (up to 4099 elements), roots varied, buffers at varied
 *       element-aligned offsets, output poisoned before each call and guard
 *       bytes after it; then one large call per collective (about maxBytes
 *       of output, a prime count). Inputs and expected outputs are the
 *       oracle's (tools/oracle/oracle.h, ORACLE_SMALL: small integers for
 *       sum, max, min and avg, +-1 and +-2 for prod, random bits for the
 *       copies, fresh per call), computed independently of the library's
 *       reduction code, exact in every type, compared bitwise (integers
 *       wrap; avg: integers truncate the wrapped sum, floats round the
 *       exact mean once with the one codec, core/fpconv.h).
 *       With COLL_RANKS_PER_HOST=L the ranks act as hosts of L ranks
 *       (MSCCLPP_HOSTID); with COLL_NET_STAGED set, the network transport
 *       stages host memory as it does GPU memory without FI_HMEM.
 *   coll_worker p2p
 *       groups of send/recv: a ring, an all-to-all with a different size
 *       for every pair (self included), several messages per pair in one
 *       group (order), blocking send/recv ping-pong, send to self.
 *   coll_worker alltoallv
 *       mscclppAllToAllv with new counts every call (every rank computes the
 *       same matrix from the call number: oracleA2avCount): every type,
 *       counts 0, 1 and primes up to 4099, a rank that sends nothing
 *       (sendbuff NULL on some calls), a rank that receives nothing
 *       (recvbuff NULL), blocks placed in sendbuff out of rank order with
 *       gaps, buffers at odd element offsets, capacities with slack; the
 *       output, the slack and a guard region after the capacity, recvcounts
 *       and rdispls are checked exactly. Then bad arguments, each refused
 *       with a message naming it (no rank communicates), and one more good
 *       call.
 *   coll_worker alltoallv_errors   (3 ranks or more)
 *       one call in which rank 0 receives more than its capacity and rank 1
 *       names a block for rank 2 outside its sendbuff: both get their error
 *       (and as the communicator's asynchronous error), nothing is written
 *       past rank 0's capacity, what fits is right, rank 2 receives nothing
 *       from rank 1, every other rank's call succeeds, and the two aborted
 *       ranks' next call fails at once.
 *   coll_worker p2psubset
 *       only ranks 0 and 1 send/recv; destroy must not wait for the others.
 *   coll_worker kill V
 *       allreduce in a loop; rank V SIGKILLs itself: every survivor's call
 *       must fail within 10 s with mscclppRemoteError naming rank V, later
 *       calls fail at once, and destroy works (prints SURVIVOR_OK; see
 *       tests/bootstrap/test_kill.sh).
 *   coll_worker mismatch
 *       rank 0 calls allreduce with another count than the others: a
 *       receiver of its message reports both sizes (mscclppInvalidUsage),
 *       and every rank fails (others at MSCCLPP_TIMEOUT, set short).
 *
 * COLL_RANKS_PER_HOST=L sets MSCCLPP_HOSTID so that ranks r with the same
 * r / L form one "host": collectives across hosts on one machine, over the
 * network transport between hosts (coll_hosts.sh). Where libfabric is
 * missing, that (and COLL_NETNS, set by coll_netns_test.sh) exits 77.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"
#include "oracle.h"
#include "transport/net/net.h"

static int rank = -1, nranks = -1;
static mscclppComm_t comm;
static uint64_t seed = 12345;
static long ncalls;
static uint64_t ncases; /* the oracle's seed of each case: every rank runs the same cases */

#define GUARD 64
#define POISON 0xA5

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The bytes of message `tag` from rank (or pair) `who`, the same on every rank. */
static void messageBytes(int who, size_t tag, size_t bytes, uint8_t* dst) {
  oracleBytes(seed, ((uint64_t)(uint32_t)who << 32) ^ (uint64_t)tag, bytes, dst);
}

/* ---- buffers ------------------------------------------------------------------------ */

static uint8_t* bufA; /* send */
static uint8_t* bufB; /* recv */
static uint8_t* bufE; /* expected */
#define MAX_A2AV_RANKS 256
static size_t bufBytes;

static void allocBuffers(size_t bytes) {
  bufBytes = (bytes + 256 + GUARD + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
  bufA = aligned_alloc(64, bufBytes);
  bufB = aligned_alloc(64, bufBytes);
  bufE = aligned_alloc(64, bufBytes);
  if (bufA == NULL || bufB == NULL || bufE == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    exit(1);
  }
}

struct caseDesc {
  const char* coll;
  int type, op, inplace, root;
  size_t count;
};

static void report(const struct caseDesc* c, const char* what, size_t at, const uint8_t* got, const uint8_t* want,
                   size_t ts) {
  char g[40] = "", w[40] = "";
  for (size_t k = 0; k < ts && got != NULL; k++) snprintf(g + 2 * k, 3, "%02x", got[k]);
  for (size_t k = 0; k < ts && want != NULL; k++) snprintf(w + 2 * k, 3, "%02x", want[k]);
  fprintf(stderr, "rank %d: FAIL %s %s op %s %s count %zu root %d: %s at byte %zu: got %s expected %s\n", rank,
          c->coll, mscclppDataTypeName((mscclppDataType_t)c->type), mscclppRedOpName((mscclppRedOp_t)c->op),
          c->inplace ? "in-place" : "out-of-place", c->count, c->root, what, at, g, w);
  harnessFailures_++;
}

/* Compare out (bytes long) with want element-wise, and the guard after it. */
static int checkOut(const struct caseDesc* c, const uint8_t* out, const uint8_t* want, size_t bytes, size_t ts) {
  if (memcmp(out, want, bytes) != 0) {
    for (size_t k = 0; k < bytes; k += ts)
      if (memcmp(out + k, want + k, ts) != 0) {
        report(c, "wrong value", k, out + k, want + k, ts);
        return 0;
      }
  }
  for (size_t k = 0; k < GUARD; k++)
    if (out[bytes + k] != POISON) {
      report(c, "guard byte overwritten", bytes + k, out + bytes + k, NULL, 1);
      return 0;
    }
  return 1;
}

static int callOk(const struct caseDesc* c, mscclppResult_t res) {
  ncalls++;
  if (res == mscclppSuccess) return 1;
  fprintf(stderr, "rank %d: FAIL %s %s op %s count %zu: %s: %s\n", rank, c->coll,
          mscclppDataTypeName((mscclppDataType_t)c->type), mscclppRedOpName((mscclppRedOp_t)c->op), c->count,
          mscclppGetErrorString(res), mscclppGetLastError());
  harnessFailures_++;
  exit(1); /* the ranks are out of step now */
}

/* ---- one case per collective ---------------------------------------------------------- */

static const char* const collName[] = {[ORACLE_ALLREDUCE] = "allreduce", [ORACLE_ALLGATHER] = "allgather",
                                       [ORACLE_REDUCESCATTER] = "reducescatter", [ORACLE_BROADCAST] = "broadcast",
                                       [ORACLE_REDUCE] = "reduce", [ORACLE_ALLTOALL] = "alltoall"};

static void runCase(enum oracleColl coll, int t, int op, int inplace, size_t count, int root, size_t offElems) {
  const size_t ts = mscclppDataTypeSize((mscclppDataType_t)t), cb = count * ts, nr = (size_t)nranks;
  const size_t off = offElems * ts;
  struct caseDesc c = {collName[coll], t, op, inplace, root, count};
  const int reduces = coll == ORACLE_ALLREDUCE || coll == ORACLE_REDUCESCATTER || coll == ORACLE_REDUCE;
  struct oracleCall g;
  oracleInit(&g, ORACLE_SMALL, t, reduces ? op : ORACLE_COPY, nranks, oracleMix(seed ^ ++ncases));
  uint8_t* send = bufA + off;
  uint8_t* recv = bufB + off;
  if (coll == ORACLE_ALLREDUCE) {
    oracleInputs(&g, rank, 0, count, send);
    oracleExpected(&g, coll, rank, root, count, bufE);
    memset(recv, POISON, cb + GUARD);
    if (inplace) memcpy(recv, send, cb);
    if (!callOk(&c, mscclppAllReduce(inplace ? recv : send, recv, count, (mscclppDataType_t)t, (mscclppRedOp_t)op,
                                     comm, NULL)))
      return;
    checkOut(&c, recv, bufE, cb, ts);
  } else if (coll == ORACLE_REDUCESCATTER) {
    /* input: nranks blocks of count; block b holds indices b*count.. */
    memset(recv, POISON, cb * nr + GUARD);
    uint8_t* in = inplace ? recv : send;
    oracleInputs(&g, rank, 0, count * nr, in);
    oracleExpected(&g, coll, rank, root, count, bufE);
    uint8_t* out = inplace ? recv + (size_t)rank * cb : recv;
    if (!inplace) memset(recv, POISON, cb + GUARD);
    if (!callOk(&c, mscclppReduceScatter(in, out, count, (mscclppDataType_t)t, (mscclppRedOp_t)op, comm, NULL)))
      return;
    if (!inplace) {
      checkOut(&c, out, bufE, cb, ts);
    } else {
      /* the other blocks of the buffer are left as they were */
      if (memcmp(out, bufE, cb) != 0) report(&c, "wrong value (in place)", 0, NULL, NULL, 0);
      oracleInputs(&g, rank, 0, count * nr, bufE);
      memcpy(bufE + (size_t)rank * cb, out, cb);
      checkOut(&c, recv, bufE, cb * nr, ts);
    }
  } else if (coll == ORACLE_REDUCE) {
    oracleInputs(&g, rank, 0, count, send);
    memset(recv, POISON, cb + GUARD);
    if (inplace) memcpy(recv, send, cb);
    if (!callOk(&c, mscclppReduce(inplace ? recv : send, recv, count, (mscclppDataType_t)t, (mscclppRedOp_t)op,
                                  root, comm, NULL)))
      return;
    if (rank == root) {
      oracleExpected(&g, coll, rank, root, count, bufE);
    } else if (inplace) {
      memcpy(bufE, send, cb); /* non-roots' buffers untouched */
    } else {
      memset(bufE, POISON, cb);
    }
    checkOut(&c, recv, bufE, cb, ts);
  } else if (coll == ORACLE_ALLGATHER) {
    memset(recv, POISON, cb * nr + GUARD);
    uint8_t* in = inplace ? recv + (size_t)rank * cb : send;
    oracleInputs(&g, rank, 0, count, in);
    oracleExpected(&g, coll, rank, root, count, bufE);
    if (!callOk(&c, mscclppAllGather(in, recv, count, (mscclppDataType_t)t, comm, NULL))) return;
    checkOut(&c, recv, bufE, cb * nr, ts);
  } else if (coll == ORACLE_BROADCAST) {
    memset(recv, POISON, cb + GUARD);
    const void* in = NULL;
    if (rank == root) {
      oracleInputs(&g, root, 0, count, inplace ? recv : send);
      in = inplace ? recv : send;
    } else if (inplace) {
      in = recv;
    }
    oracleExpected(&g, coll, rank, root, count, bufE);
    if (!callOk(&c, mscclppBroadcast(in, recv, count, (mscclppDataType_t)t, root, comm, NULL))) return;
    checkOut(&c, recv, bufE, cb, ts);
  } else if (coll == ORACLE_ALLTOALL) {
    /* rank r sends block d of its input to rank d; in place, the input is
     * the output buffer */
    memset(recv, POISON, cb * nr + GUARD);
    uint8_t* in = inplace ? recv : send;
    oracleInputs(&g, rank, 0, count * nr, in);
    oracleExpected(&g, coll, rank, root, count, bufE);
    if (!callOk(&c, mscclppAllToAll(in, recv, count, (mscclppDataType_t)t, comm, NULL))) return;
    checkOut(&c, recv, bufE, cb * nr, ts);
  }
}

static const enum oracleColl reducing[] = {ORACLE_ALLREDUCE, ORACLE_REDUCESCATTER, ORACLE_REDUCE};
static const enum oracleColl copying[] = {ORACLE_ALLGATHER, ORACLE_BROADCAST, ORACLE_ALLTOALL};

static void testMatrix(size_t maxBytes) {
  static const size_t counts[] = {0, 1, 2, 3, 7, 31, 257, 1021, 4099};
  const int ncounts = (int)(sizeof(counts) / sizeof(counts[0]));
  allocBuffers(maxBytes > (size_t)4099 * 8 * (size_t)nranks ? maxBytes : (size_t)4099 * 8 * (size_t)nranks);
  double t0 = nowSec();
  int k = 0;
  for (int t = 0; t < mscclppNumTypes; t++) {
    for (int ci = 0; ci < ncounts; ci++) {
      size_t count = counts[ci];
      for (int inplace = 0; inplace < 2; inplace++) {
        for (int op = 0; op < mscclppNumOps; op++)
          for (int j = 0; j < 3; j++, k++)
            runCase(reducing[j], t, op, inplace, count, (k * 7 + ci) % nranks, (size_t)(k % 5));
        for (int j = 0; j < 3; j++, k++)
          runCase(copying[j], t, mscclppSum, inplace, count, (k * 3 + ci) % nranks, (size_t)(k % 3));
      }
    }
  }
  double t1 = nowSec();
  /* large: about maxBytes of output, prime-ish counts, a few type/op pairs */
  static const int bigTypes[][2] = {{mscclppFloat32, mscclppSum}, {mscclppBfloat16, mscclppAvg},
                                    {mscclppInt8, mscclppProd}, {mscclppFloat8e4m3, mscclppMax}};
  for (int b = 0; b < 4; b++) {
    int t = bigTypes[b][0], op = bigTypes[b][1];
    size_t ts = mscclppDataTypeSize((mscclppDataType_t)t);
    size_t count = (maxBytes / ts) - 3;
    size_t per = (maxBytes / ts / (size_t)nranks) - 1;
    if (b == 0 || b == 1) {
      runCase(ORACLE_ALLREDUCE, t, op, b, count, 0, 1);
      runCase(ORACLE_REDUCE, t, op, 1 - b, count, nranks - 1, 0);
      runCase(ORACLE_REDUCESCATTER, t, op, b, per, 0, 2);
    } else if (b == 2) {
      runCase(ORACLE_ALLGATHER, t, op, 0, per, 0, 1);
      runCase(ORACLE_ALLTOALL, t, op, 0, per, 0, 3);
      runCase(ORACLE_ALLTOALL, t, op, 1, per, 0, 1);
    } else {
      runCase(ORACLE_BROADCAST, t, op, 1, count, nranks / 2, 0);
      runCase(ORACLE_ALLREDUCE, t, op, 0, count, 0, 0);
    }
  }
  printf("rank %d: matrix: %ld calls, small %.1f s, large (%zu bytes) %.1f s\n", rank, ncalls, t1 - t0, maxBytes,
         nowSec() - t1);
}

/* ---- send/recv ------------------------------------------------------------------------- */

static size_t pairBytes(int s, int d, int k) {
  return 1 + ((size_t)s * 7919 + (size_t)d * 104729 + (size_t)k * 13) % 9000;
}

static void testP2p(void) {
  allocBuffers((size_t)nranks * 3 * 20000 + (1 << 20));
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  static const size_t ringSizes[] = {1, 1000, 3 * 4096 + 5, 1 << 20};
  struct caseDesc c = {"sendrecv", mscclppUint8, 0, 0, 0, 0};
  /* first, ranks 0 and 2 alone (the others connect to them later) */
  if (nranks >= 3 && (rank == 0 || rank == 2)) {
    size_t n = 77777;
    int peer = 2 - rank;
    messageBytes(rank, 5, n, bufA);
    memset(bufB, POISON, n + GUARD);
    CHECK_RES(mscclppGroupStart(), mscclppSuccess);
    CHECK_RES(mscclppRecv(bufB, n, mscclppUint8, peer, comm, NULL), mscclppSuccess);
    CHECK_RES(mscclppSend(bufA, n, mscclppUint8, peer, comm, NULL), mscclppSuccess);
    callOk(&c, mscclppGroupEnd());
    messageBytes(peer, 5, n, bufE);
    checkOut(&c, bufB, bufE, n, 1);
  }
  /* ring */
  for (int s = 0; s < 4; s++) {
    size_t n = ringSizes[s];
    c.count = n;
    messageBytes(rank, 7, n, bufA + 3);
    memset(bufB + 1, POISON, n + GUARD);
    CHECK_RES(mscclppGroupStart(), mscclppSuccess);
    CHECK_RES(mscclppSend(bufA + 3, n, mscclppUint8, next, comm, NULL), mscclppSuccess);
    CHECK_RES(mscclppRecv(bufB + 1, n, mscclppUint8, prev, comm, NULL), mscclppSuccess);
    callOk(&c, mscclppGroupEnd());
    messageBytes(prev, 7, n, bufE);
    checkOut(&c, bufB + 1, bufE, n, 1);
  }
  /* all-to-all with a size per pair, self included, as float32 elements */
  for (int k = 0; k < 2; k++) {
    size_t offS = 0, offR = 0;
    CHECK_RES(mscclppGroupStart(), mscclppSuccess);
    for (int p = 0; p < nranks; p++) {
      size_t ns = pairBytes(rank, p, k), nrv = pairBytes(p, rank, k);
      messageBytes(rank * 1000 + p, (size_t)k, ns * 4, bufA + offS);
      memset(bufB + offR, POISON, nrv * 4);
      CHECK_RES(mscclppSend(bufA + offS, ns, mscclppFloat32, p, comm, NULL), mscclppSuccess);
      CHECK_RES(mscclppRecv(bufB + offR, nrv, mscclppFloat32, p, comm, NULL), mscclppSuccess);
      offS += ns * 4;
      offR += nrv * 4;
    }
    c.count = offR;
    callOk(&c, mscclppGroupEnd());
    offR = 0;
    for (int p = 0; p < nranks; p++) {
      size_t nrv = pairBytes(p, rank, k);
      messageBytes(p * 1000 + rank, (size_t)k, nrv * 4, bufE);
      if (memcmp(bufB + offR, bufE, nrv * 4) != 0)
        report(&c, "all-to-all by send/recv: wrong data from a peer", offR, NULL, NULL, 0);
      offR += nrv * 4;
    }
  }
  /* several messages per pair in one group, received in order */
  {
    size_t sz[3] = {5000, 17, 12000};
    size_t o = 0;
    CHECK_RES(mscclppGroupStart(), mscclppSuccess);
    for (int m = 0; m < 3; m++) {
      messageBytes(rank + 100 * m, 0, sz[m], bufA + o);
      memset(bufB + o, POISON, sz[m]);
      CHECK_RES(mscclppRecv(bufB + o, sz[m], mscclppInt8, prev, comm, NULL), mscclppSuccess);
      CHECK_RES(mscclppSend(bufA + o, sz[m], mscclppInt8, next, comm, NULL), mscclppSuccess);
      o += sz[m];
    }
    callOk(&c, mscclppGroupEnd());
    o = 0;
    for (int m = 0; m < 3; m++) {
      messageBytes(prev + 100 * m, 0, sz[m], bufE);
      if (memcmp(bufB + o, bufE, sz[m]) != 0) report(&c, "ordered messages: wrong data", o, NULL, NULL, 0);
      o += sz[m];
    }
  }
  /* blocking ping-pong between rank 0 and the last rank */
  if (nranks > 1 && (rank == 0 || rank == nranks - 1)) {
    int peer = rank == 0 ? nranks - 1 : 0;
    size_t n = 100003;
    for (int it = 0; it < 3; it++) {
      if (rank == 0) {
        messageBytes(it, 0, n, bufA);
        callOk(&c, mscclppSend(bufA, n, mscclppUint8, peer, comm, NULL));
        memset(bufB, POISON, n + GUARD);
        callOk(&c, mscclppRecv(bufB, n, mscclppUint8, peer, comm, NULL));
        messageBytes(it + 50, 0, n, bufE);
      } else {
        memset(bufB, POISON, n + GUARD);
        callOk(&c, mscclppRecv(bufB, n, mscclppUint8, peer, comm, NULL));
        messageBytes(it, 0, n, bufE);
        checkOut(&c, bufB, bufE, n, 1);
        messageBytes(it + 50, 0, n, bufA);
        callOk(&c, mscclppSend(bufA, n, mscclppUint8, peer, comm, NULL));
        messageBytes(it, 0, n, bufE);
      }
      checkOut(&c, bufB, bufE, n, 1);
    }
  }
  /* a lone send to self (it fits in the scratch), then the receive */
  {
    size_t n = 3000;
    messageBytes(rank, 99, n, bufA);
    memset(bufB, POISON, n + GUARD);
    callOk(&c, mscclppSend(bufA, n, mscclppUint8, rank, comm, NULL));
    callOk(&c, mscclppRecv(bufB, n, mscclppUint8, rank, comm, NULL));
    messageBytes(rank, 99, n, bufE);
    checkOut(&c, bufB, bufE, n, 1);
  }
  /* zero-byte operations do nothing */
  CHECK_RES(mscclppGroupStart(), mscclppSuccess);
  CHECK_RES(mscclppSend(NULL, 0, mscclppUint8, next, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppRecv(NULL, 0, mscclppUint8, prev, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppGroupEnd(), mscclppSuccess);
  printf("rank %d: p2p: %ld calls\n", rank, ncalls);
}

/* ---- all-to-all-v ------------------------------------------------------------------------ */

#define A2AV_MAX_COUNT 4099
#define A2AV_CALLS_PER_TYPE 8

/* One checked call k of type t: this rank's blocks placed out of rank order
 * with gaps, capacities with slack. */
static void a2avCall(int k, int t) {
  const size_t ts = mscclppDataTypeSize((mscclppDataType_t)t);
  struct caseDesc c = {"alltoallv", t, 0, 0, 0, 0};
  size_t sendcounts[MAX_A2AV_RANKS], sdispls[MAX_A2AV_RANKS], recvcounts[MAX_A2AV_RANKS], rdispls[MAX_A2AV_RANKS];
  uint8_t* send = bufA + (size_t)(k % 5) * ts;
  uint8_t* recv = bufB + (size_t)(k % 3) * ts;
  size_t at = 0, sent = 0;
  for (int j = 0; j < nranks; j++) {
    int d = (j + k) % nranks; /* out of rank order */
    sendcounts[d] = oracleA2avCount(seed, k, nranks, rank, d, A2AV_MAX_COUNT);
    at += (size_t)((k + d) % 3); /* a gap */
    sdispls[d] = sendcounts[d] > 0 || k % 4 != 0 ? at : (size_t)1 << 40; /* a zero count's displacement is not read */
    oracleA2avBlock(seed, k, rank, d, sendcounts[d] * ts, send + at * ts);
    at += sendcounts[d];
    sent += sendcounts[d];
  }
  size_t sendcap = at + (size_t)(k % 2);
  size_t wantCounts[MAX_A2AV_RANKS], wantDispls[MAX_A2AV_RANKS];
  oracleA2avRecv(seed, k, nranks, rank, A2AV_MAX_COUNT, wantCounts, wantDispls);
  size_t total = wantDispls[nranks - 1] + wantCounts[nranks - 1];
  size_t recvcap = total + (size_t)(k % 3);
  memset(recv, POISON, recvcap * ts + GUARD);
  memset(recvcounts, POISON, sizeof(recvcounts));
  memset(rdispls, POISON, sizeof(rdispls));
  c.count = total;
  /* nothing to send or receive: NULL buffers with capacity 0, on some calls */
  const void* sb = sent == 0 && k % 4 < 2 ? NULL : send;
  void* rb = total == 0 && recvcap == 0 ? NULL : recv;
  if (sb == NULL) sendcap = 0;
  callOk(&c, mscclppAllToAllv(sb, sendcap, sendcounts, sdispls, rb, recvcap, recvcounts, rdispls,
                              (mscclppDataType_t)t, comm, NULL));
  for (int s = 0; s < nranks; s++) {
    if (recvcounts[s] != wantCounts[s] || rdispls[s] != wantDispls[s]) {
      fprintf(stderr, "rank %d: FAIL alltoallv call %d %s: from rank %d recvcounts %zu rdispls %zu, expected %zu %zu\n",
              rank, k, mscclppDataTypeName((mscclppDataType_t)t), s, recvcounts[s], rdispls[s], wantCounts[s],
              wantDispls[s]);
      harnessFailures_++;
    }
    oracleA2avBlock(seed, k, s, rank, wantCounts[s] * ts, bufE + wantDispls[s] * ts);
  }
  memset(bufE + total * ts, POISON, (recvcap - total) * ts); /* the slack is left as it was */
  if (rb != NULL) checkOut(&c, recv, bufE, recvcap * ts, ts);
}

/* A refused call: `want` and a message that says `what`. */
static void a2avRefused(const char* label, mscclppResult_t res, mscclppResult_t want, const char* what) {
  const char* why = mscclppGetLastError();
  if (res != want || strstr(why, what) == NULL) {
    fprintf(stderr, "rank %d: FAIL alltoallv %s: %s (%s), expected %s mentioning \"%s\"\n", rank, label,
            mscclppGetErrorString(res), why, mscclppGetErrorString(want), what);
    harnessFailures_++;
  }
}

static void testAllToAllv(void) {
  allocBuffers((size_t)nranks * (A2AV_MAX_COUNT + 3) * 8 + 64);
  int k = 0;
  for (int t = 0; t < mscclppNumTypes; t++)
    for (int i = 0; i < A2AV_CALLS_PER_TYPE; i++) a2avCall(k++, t);
  /* bad arguments: refused on the calling rank before anything is sent */
  size_t sc[MAX_A2AV_RANKS] = {0}, sd[MAX_A2AV_RANKS] = {0}, rc[MAX_A2AV_RANKS], rd[MAX_A2AV_RANKS];
  const mscclppResult_t bad = mscclppInvalidArgument;
  a2avRefused("NULL comm", mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, rc, rd, mscclppInt32, NULL, NULL), bad,
              "comm is NULL");
  a2avRefused("bad type", mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, rc, rd, (mscclppDataType_t)99, comm, NULL), bad,
              "unknown data type 99");
  a2avRefused("NULL sendcounts", mscclppAllToAllv(bufA, 8, NULL, sd, bufB, 8, rc, rd, mscclppInt32, comm, NULL), bad,
              "sendcounts is NULL");
  a2avRefused("NULL rdispls", mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, rc, NULL, mscclppInt32, comm, NULL), bad,
              "rdispls is NULL");
  a2avRefused("misaligned recvcounts",
              mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, (size_t*)((uint8_t*)rc + 4), rd, mscclppInt32, comm, NULL),
              bad, "recvcounts");
  a2avRefused("NULL sendbuff", mscclppAllToAllv(NULL, 8, sc, sd, bufB, 8, rc, rd, mscclppInt32, comm, NULL), bad,
              "sendbuff is NULL");
  a2avRefused("misaligned recvbuff", mscclppAllToAllv(bufA, 8, sc, sd, bufB + 2, 8, rc, rd, mscclppInt32, comm, NULL),
              bad, "not aligned");
  a2avRefused("huge capacity",
              mscclppAllToAllv(bufA, 8, sc, sd, bufB, SIZE_MAX / 4, rc, rd, mscclppInt64, comm, NULL), bad,
              "too large");
  a2avRefused("in place", mscclppAllToAllv(bufA, 64, sc, sd, bufA, 64, rc, rd, mscclppInt32, comm, NULL), bad,
              "in place is not supported");
  a2avRefused("overlapping buffers",
              mscclppAllToAllv(bufA, 64, sc, sd, bufA + 4 * 63, 64, rc, rd, mscclppInt32, comm, NULL), bad,
              "in place is not supported");
  a2avRefused("recvcounts on sdispls", mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, sd, rd, mscclppInt32, comm, NULL),
              bad, "sdispls");
  a2avRefused("rdispls in recvbuff",
              mscclppAllToAllv(bufA, 8, sc, sd, bufB, 64, rc, (size_t*)bufB, mscclppInt32, comm, NULL), bad,
              "overlaps");
  a2avRefused("recvcounts is rdispls", mscclppAllToAllv(bufA, 8, sc, sd, bufB, 8, rc, rc, mscclppInt32, comm, NULL),
              bad, "overlaps");
  /* the ranks are still in step */
  a2avCall(k++, mscclppFloat32);
  printf("rank %d: alltoallv: %ld calls\n", rank, ncalls);
}

/* Rank 0 receives more than its capacity and rank 1 names a block for
 * rank 2 outside its sendbuff, in the same call. */
static void testAllToAllvErrors(void) {
  if (nranks < 3) {
    printf("rank %d: alltoallv_errors needs 3 ranks or more\n", rank);
    harnessFailures_++;
    return;
  }
  allocBuffers((size_t)nranks * 64 * 4 + 64);
  const size_t ts = 4, per = 10; /* int32 */
  size_t sc[MAX_A2AV_RANKS], sd[MAX_A2AV_RANKS], rc[MAX_A2AV_RANKS], rd[MAX_A2AV_RANKS];
  struct caseDesc c = {"alltoallv", mscclppInt32, 0, 0, 0, per};
  const int k = 77;
  for (int d = 0; d < nranks; d++) {
    sc[d] = per;
    sd[d] = (size_t)d * per;
    oracleA2avBlock(seed, k, rank, d, per * ts, bufA + sd[d] * ts);
  }
  size_t sendcap = (size_t)nranks * per;
  if (rank == 1) sd[2] = sendcap - 3; /* 3 of its 10 elements are inside */
  const size_t total = (size_t)nranks * per - (rank == 2 ? per : 0);
  const size_t recvcap = rank == 0 ? total - 7 : total;
  memset(bufB, POISON, recvcap * ts + GUARD);
  mscclppResult_t res =
      mscclppAllToAllv(bufA, sendcap, sc, sd, bufB, recvcap, rc, rd, mscclppInt32, comm, NULL);
  const char* why = mscclppGetLastError();
  printf("rank %d: alltoallv with bad counts: %s: %s\n", rank, mscclppGetErrorString(res), why);
  char want[3][64];
  snprintf(want[0], sizeof(want[0]), "rank %d", rank);
  if (rank == 0) {
    snprintf(want[1], sizeof(want[1]), "%zu elements arrived", total);
    snprintf(want[2], sizeof(want[2]), "recvcapacity %zu", recvcap);
  } else {
    snprintf(want[1], sizeof(want[1]), "block for rank 2");
    snprintf(want[2], sizeof(want[2]), "sendcapacity %zu", sendcap);
  }
  if (rank <= 1) {
    CHECK(res == (rank == 0 ? mscclppInvalidUsage : mscclppInvalidArgument));
    for (int i = 0; i < 3; i++) CHECK(strstr(why, want[i]) != NULL);
    mscclppResult_t async = mscclppSuccess;
    CHECK_RES(mscclppCommGetAsyncError(comm, &async), mscclppSuccess);
    CHECK(async == res);
    CHECK(strstr(mscclppGetLastError(), want[1]) != NULL);
    /* the communicator is aborted: its next call fails at once, naming why */
    double t0 = nowSec();
    CHECK(mscclppAllToAllv(bufA, sendcap, sc, sd, bufB, recvcap, rc, rd, mscclppInt32, comm, NULL) == res);
    CHECK(nowSec() - t0 < 1.0);
  } else {
    CHECK_RES(res, mscclppSuccess);
  }
  /* what arrived, up to the capacity; the guard after it untouched */
  size_t off = 0;
  for (int s = 0; s < nranks; s++) {
    size_t n = rank == 2 && s == 1 ? 0 : per;
    CHECK(rc[s] == n);
    CHECK(rd[s] == off);
    oracleA2avBlock(seed, k, s, rank, n * ts, bufE + off * ts);
    off += n;
  }
  checkOut(&c, bufB, bufE, recvcap * ts, ts);
}

/* ---- failures --------------------------------------------------------------------------- */

/* Only ranks 0 and 1 ever communicate; every rank then destroys its
 * communicator (no rank may wait for the idle ones). */
static void testP2pSubset(void) {
  allocBuffers(1 << 16);
  struct caseDesc c = {"sendrecv", mscclppUint8, 0, 0, 0, 1000};
  if (rank > 1 || nranks < 2) return;
  messageBytes(rank, 0, 1000, bufA);
  CHECK_RES(mscclppGroupStart(), mscclppSuccess);
  CHECK_RES(mscclppSend(bufA, 1000, mscclppUint8, 1 - rank, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppRecv(bufB, 1000, mscclppUint8, 1 - rank, comm, NULL), mscclppSuccess);
  callOk(&c, mscclppGroupEnd());
  messageBytes(1 - rank, 0, 1000, bufE);
  if (memcmp(bufB, bufE, 1000) != 0) report(&c, "wrong data", 0, NULL, NULL, 0);
}

static int testKill(int victim) {
  size_t count = 1 << 18;
  allocBuffers(count * 4);
  struct oracleCall g;
  oracleInit(&g, ORACLE_SMALL, mscclppFloat32, mscclppSum, nranks, seed);
  CHECK_RES(mscclppBootstrapBarrier(comm), mscclppSuccess);
  for (int it = 0; it < 100000; it++) {
    if (rank == victim && it == 20) {
      printf("rank %d: killing myself before allreduce %d\n", rank, it);
      fflush(stdout);
      struct timespec ts = {0, 300000000L}; /* the others are waiting by now */
      nanosleep(&ts, NULL);
      raise(SIGKILL);
    }
    oracleInputs(&g, rank, 0, count, bufA);
    double t0 = nowSec();
    mscclppResult_t res = mscclppAllReduce(bufA, bufB, count, mscclppFloat32, mscclppSum, comm, NULL);
    if (res == mscclppSuccess) continue;
    double waited = nowSec() - t0;
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    const char* why = mscclppGetLastError();
    printf("rank %d: allreduce %d: %s after %.2f s: %s\n", rank, it, mscclppGetErrorString(res), waited, why);
    CHECK(res == mscclppRemoteError);
    CHECK(strstr(why, want) != NULL);
    CHECK(waited < 10.0);
    /* later calls fail at once */
    t0 = nowSec();
    CHECK(mscclppAllGather(bufA, bufB, 16, mscclppFloat32, comm, NULL) == mscclppRemoteError);
    CHECK(nowSec() - t0 < 1.0);
    CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
    if (harnessFailures_ == 0) printf("SURVIVOR_OK rank %d after %.2f s\n", rank, waited);
    return harnessFailures_ == 0 ? 0 : 1;
  }
  printf("rank %d: FAIL: every allreduce succeeded although rank %d should have died\n", rank, victim);
  return 1;
}

static void testMismatch(void) {
  allocBuffers(1 << 16);
  size_t count = rank == 0 ? 1000 : 1001;
  memset(bufA, 0, count * 4);
  double t0 = nowSec();
  mscclppResult_t res = mscclppAllReduce(bufA, bufB, count, mscclppFloat32, mscclppSum, comm, NULL);
  const char* why = mscclppGetLastError();
  printf("rank %d: mismatched allreduce: %s after %.2f s: %s\n", rank, mscclppGetErrorString(res), nowSec() - t0, why);
  CHECK(res != mscclppSuccess);
  if (res == mscclppInvalidUsage) CHECK(strstr(why, "bytes") != NULL);
  /* the communicator stays failed */
  CHECK(mscclppAllReduce(bufA, bufB, 4, mscclppFloat32, mscclppSum, comm, NULL) != mscclppSuccess);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "matrix";
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the host backend, also on a GPU machine */
  const char* perHost = getenv("COLL_RANKS_PER_HOST");
  const char* envRank = getenv("MSCCLPP_RANK");
  if (perHost != NULL && envRank != NULL && atoi(perHost) > 0) {
    char id[32];
    snprintf(id, sizeof(id), "coll-host-%d", atoi(envRank) / atoi(perHost));
    setenv("MSCCLPP_HOSTID", id, 1);
  }
  /* host memory registered as staged (as GPU memory without FI_HMEM is) */
  if (getenv("COLL_NET_STAGED") != NULL) mscclppNetTestForceStaging(1);
  if ((perHost != NULL || getenv("COLL_NETNS") != NULL) && !mscclppNetLibAvailable()) {
    printf("SKIP: ranks on several hosts need the network transport: %s\n", mscclppNetLibError());
    return 77;
  }
  mscclppResult_t res = mscclppCommInitFromEnv(&comm);
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclppCommInitFromEnv: %s: %s\n", mscclppGetErrorString(res), mscclppGetLastError());
    return 1;
  }
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &nranks);
  if (strcmp(mode, "kill") == 0) return testKill(argc > 2 ? atoi(argv[2]) : 1);
  if (strcmp(mode, "matrix") == 0) {
    size_t maxBytes = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (size_t)16 << 20;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    if (maxBytes > ((size_t)1 << 20)) {
      printf("rank %d: sanitizer build: large sizes capped at 1 MiB\n", rank);
      maxBytes = (size_t)1 << 20;
    }
#endif
    testMatrix(maxBytes);
  } else if (strcmp(mode, "p2p") == 0) {
    testP2p();
  } else if (strcmp(mode, "alltoallv") == 0) {
    testAllToAllv();
  } else if (strcmp(mode, "alltoallv_errors") == 0) {
    testAllToAllvErrors();
  } else if (strcmp(mode, "p2psubset") == 0) {
    testP2pSubset();
  } else if (strcmp(mode, "mismatch") == 0) {
    testMismatch();
  } else {
    fprintf(stderr,
            "usage: coll_worker matrix [maxBytes] | p2p | alltoallv | alltoallv_errors | p2psubset | kill V | "
            "mismatch\n");
    return 2;
  }
  res = mscclppCommDestroy(comm);
  if (res != mscclppSuccess) fprintf(stderr, "rank %d: mscclppCommDestroy: %s\n", rank, mscclppGetLastError());
  int ok = harnessFailures_ == 0 && res == mscclppSuccess;
  printf("rank %d: %s %s\n", rank, mode, ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
