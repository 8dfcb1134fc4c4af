/* SPDX-License-Identifier: MIT */
/*
 * The network transport against raw libfabric, side by side in one run
 * (2 ranks on one host; host backend):
 *
 *   mscclpp-run -n 2 -- env MSCCLPP_NET_PROVIDER='tcp;ofi_rxm' MSCCLPP_NET_IFNAME==lo \
 *       bench_net [iters] [rounds] [blocks]
 *
 *   iters  round trips of each latency measurement (default 20000),
 *   rounds 64 MiB rounds of each stream measurement (default 20),
 *   blocks how many raw/ours pairs of each (default 7).
 *
 * Raw and ours are measured in the same process, alternating: `blocks`
 * blocks, each raw then ours, with the same warm-up (100 round trips, one
 * stream round) and on the same (main) thread. While raw runs, our proxy
 * thread is stopped (mscclppCommProxyStop), so raw runs with no thread of
 * ours beside it, as it would alone. Each block's pair gives one ratio; the
 * goal figure is the MEDIAN of the per-block ratios, which drift between
 * blocks (machine load, frequency) does not move the way it moves one pair
 * measured once. Means are printed too.
 *
 *   latency   raw: fi_inject_write of 8 bytes, ping-pong (each side polls
 *             the word the other writes, reading its CQ for progress);
 *             ours: 8-byte putWithSignal ping-pong on a port channel over
 *             transport Net (kernel thread -> FIFO -> proxy -> RMA; the
 *             peer's proxy reads its CQ, its kernel thread waits): the
 *             bytes inside the trigger, written with the signal as ONE
 *             message (the bytes, then the semaphore, as two write targets;
 *             with MSCCLPP_NET_SIGNAL=cq, remote CQ data). Half round trip;
 *             goal: median ours/raw <= 1.2x.
 *   bandwidth raw: RMA writes of 1 MiB, 16 in flight, then an 8-byte flag the
 *             receiver acknowledges; ours: 1 MiB puts, a signal after the
 *             last, the receiver signals back. Goal: median ours/raw >= 90%.
 *
 * Measured once, for reference (not in the blocks): the same put as a copy
 * (the handle's INLINE flag cleared: an RMA write and an 8-byte signal
 * write, two messages; first of all, while the signal's word is not in the
 * signal table yet); raw with a yielding sibling thread per rank (the host
 * backend has two threads per rank: its kernel thread and the proxy); raw
 * posting the message ours posts with MSCCLPP_NET_SIGNAL=cq (an injected
 * 8-byte fi_writemsg with remote CQ data and a local completion), each side
 * still polling the word; and
 * probes of what that message costs: the same without the local completion,
 * without the CQ data, and a payload word plus the polled word as two RMA
 * targets of one message (a put and its signal with neither). The raw
 * endpoint binds its CQ with FI_SELECTIVE_COMPLETION so that a post
 * completes only when it asks to.
 *
 * Rank 0 prints every block's pair, the medians and the means.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"
#include "transport/net/net.h"
#include "bench_stats.h"

#ifdef MSCCLPP_HAVE_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#endif

#define MIB (1u << 20)
#define STREAM_DEPTH 16
#define STREAM_BYTES (64u * MIB)

static int rank, peer;
static mscclppComm_t comm;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define OK(call)                                                                                           \
  do {                                                                                                     \
    mscclppResult_t r_ = (call);                                                                           \
    if (r_ != mscclppSuccess) {                                                                            \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, mscclppGetErrorString(r_), mscclppGetLastError()); \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)

/* ---- raw libfabric --------------------------------------------------------------- */

#ifdef MSCCLPP_HAVE_LIBFABRIC
static struct {
  int (*getinfo)(uint32_t, const char*, const char*, uint64_t, const struct fi_info*, struct fi_info**);
  struct fi_info* (*dupinfo)(const struct fi_info*);
  void (*freeinfo)(struct fi_info*);
  int (*fabric)(struct fi_fabric_attr*, struct fid_fabric**, void*);
} L;

struct raw {
  struct fi_info* info;
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_ep* ep;
  struct fid_cq* cq;
  struct fid_av* av;
  struct fid_mr* mr;
  fi_addr_t peer;
  uint8_t* buf; /* [0, 64): words the peer writes; [4096, +STREAM) stream target/source */
  uint64_t peerBase, peerKey;
  int inflight;
};

#define RAW(call)                                                             \
  do {                                                                        \
    int rc_ = (int)(call);                                                    \
    if (rc_) {                                                                \
      fprintf(stderr, "rank %d: %s failed: %d\n", rank, #call, rc_);          \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

/* Contexts of the raw posts that complete locally (FI_CONTEXT2 mode): a
 * ring, reused only once the post that held it has completed. */
#define RAW_CTXS 64
static struct fi_context2 rawCtx[RAW_CTXS];
static uint64_t rawCtxPosted, rawCtxDone;

static void rawPoll(struct raw* r) {
  struct fi_cq_data_entry e[16];
  ssize_t n = fi_cq_read(r->cq, e, 16);
  for (ssize_t i = 0; i < n; i++) {
    if (e[i].flags & FI_REMOTE_CQ_DATA) continue; /* the peer's message: the word tells */
    if (e[i].op_context != NULL) rawCtxDone++;   /* rawWriteMsg with FI_COMPLETION */
    else r->inflight--;                          /* rawBandwidth's writes */
  }
  if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry err;
    memset(&err, 0, sizeof(err));
    fi_cq_readerr(r->cq, &err, 0);
    fprintf(stderr, "rank %d: raw completion error %d\n", rank, err.err);
    exit(1);
  }
}

static void rawSetup(struct raw* r) {
  void* h = dlopen("libfabric.so.1", RTLD_NOW);
  if (!h) exit(77);
  *(void**)&L.getinfo = dlsym(h, "fi_getinfo");
  *(void**)&L.dupinfo = dlsym(h, "fi_dupinfo");
  *(void**)&L.freeinfo = dlsym(h, "fi_freeinfo");
  *(void**)&L.fabric = dlsym(h, "fi_fabric");
  struct fi_info* hints = L.dupinfo(NULL);
  hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->tx_attr->msg_order = FI_ORDER_WAW;
  const char* prov = getenv("MSCCLPP_NET_PROVIDER");
  const char* ifn = getenv("MSCCLPP_NET_IFNAME");
  hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp;ofi_rxm");
  hints->domain_attr->name = strdup(ifn && *ifn ? (ifn[0] == '=' ? ifn + 1 : ifn) : "lo");
  RAW(L.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &r->info));
  L.freeinfo(hints);
  RAW(L.fabric(r->info->fabric_attr, &r->fabric, NULL));
  RAW(fi_domain(r->fabric, r->info, &r->domain, NULL));
  struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_DATA, .size = 4096, .wait_obj = FI_WAIT_NONE};
  RAW(fi_cq_open(r->domain, &cq, &r->cq, NULL));
  struct fi_av_attr av = {.type = FI_AV_TABLE, .count = 4};
  RAW(fi_av_open(r->domain, &av, &r->av, NULL));
  RAW(fi_endpoint(r->domain, r->info, &r->ep, NULL));
  /* selective: only posts flagged FI_COMPLETION complete (the probes
   * below post with and without) */
  RAW(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
  RAW(fi_ep_bind(r->ep, &r->av->fid, 0));
  RAW(fi_enable(r->ep));
  size_t bytes = 4096 + STREAM_BYTES;
  if (posix_memalign((void**)&r->buf, 4096, bytes)) exit(1);
  memset(r->buf, 0, bytes);
  RAW(fi_mr_reg(r->domain, r->buf, bytes, FI_REMOTE_WRITE | FI_WRITE, 0, 7, 0, &r->mr, NULL));
  if (r->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
    RAW(fi_mr_bind(r->mr, &r->ep->fid, 0));
    RAW(fi_mr_enable(r->mr));
  }
  uint8_t me[160], them[160];
  memset(me, 0, sizeof(me));
  size_t len = 128;
  RAW(fi_getname(&r->ep->fid, me + 32, &len));
  uint64_t base = (r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)r->buf : 0;
  uint64_t key = fi_mr_key(r->mr);
  memcpy(me, &base, 8);
  memcpy(me + 8, &key, 8);
  memcpy(me + 16, &len, 8);
  OK(mscclppBootstrapSend(comm, peer, 90, me, sizeof(me)));
  OK(mscclppBootstrapRecv(comm, peer, 90, them, sizeof(them)));
  memcpy(&r->peerBase, them, 8);
  memcpy(&r->peerKey, them + 8, 8);
  if (fi_av_insert(r->av, them + 32, 1, &r->peer, 0, NULL) != 1) exit(1);
}

static void rawWait(struct raw* r, volatile uint64_t* w, uint64_t v) {
  while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) rawPoll(r);
}

static void rawInject(struct raw* r, uint64_t off, uint64_t v) {
  while (fi_inject_write(r->ep, &v, 8, r->peer, r->peerBase + off, r->peerKey) == -FI_EAGAIN) rawPoll(r);
}

/* An injected 8-byte fi_writemsg of v to the peer's word at `off`, with
 * `flags` beside FI_INJECT: FI_COMPLETION (a local completion, context from
 * the ring), FI_REMOTE_CQ_DATA (a made-up signal word). With `twoIov` the
 * same message first writes a payload word 64 bytes further, then v: a
 * put and its signal in one message, placed in order, with no CQ data. */
static void rawWriteMsg(struct raw* r, uint64_t off, uint64_t v, uint64_t flags, int twoIov) {
  while (rawCtxPosted - rawCtxDone >= RAW_CTXS) rawPoll(r);
  uint64_t pair[2] = {~v, v};
  struct iovec iov = {twoIov ? (void*)pair : (void*)&pair[1], twoIov ? sizeof(pair) : sizeof(v)};
  void* desc = NULL;
  struct fi_rma_iov rma[2] = {{r->peerBase + off + 64, sizeof(v), r->peerKey}, {r->peerBase + off, sizeof(v), r->peerKey}};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r->peer,
                           .rma_iov = twoIov ? rma : &rma[1], .rma_iov_count = twoIov ? 2 : 1,
                           .context = &rawCtx[rawCtxPosted % RAW_CTXS], .data = 0x80000000u | (uint32_t)(v & 0xffu)};
  ssize_t rc;
  while ((rc = fi_writemsg(r->ep, &msg, FI_INJECT | flags)) == -FI_EAGAIN) rawPoll(r);
  RAW(rc);
  if (flags & FI_COMPLETION) rawCtxPosted++;
}
enum { RAW_INJECT = 0, RAW_CQ_COMP, RAW_CQ, RAW_COMP, RAW_TWO_IOV, RAW_MODES };
/* The raw messages: fi_inject_write; the message ours sent for an 8-byte
 * putWithSignal before cba9d47 (an injected write with remote CQ data and a
 * local completion); and probes of what it costs (rawWriteMsg's flags and
 * two targets). */
static const struct {
  const char* name;
  uint64_t flags;
  int twoIov;
} rawMode[RAW_MODES] = {
    {"fi_inject_write", 0, 0},
    {"fi_writemsg + CQ data + local completion (ours with MSCCLPP_NET_SIGNAL=cq)", FI_COMPLETION | FI_REMOTE_CQ_DATA, 0},
    {"fi_writemsg + CQ data, no local completion", FI_REMOTE_CQ_DATA, 0},
    {"fi_writemsg + local completion, no CQ data", FI_COMPLETION, 0},
    {"fi_writemsg of a payload word and the polled word (2 RMA targets), nothing else", 0, 1}};

static void rawPost(struct raw* r, int mode, uint64_t v) {
  if (mode == RAW_INJECT)
    rawInject(r, 0, v);
  else
    rawWriteMsg(r, 0, v, rawMode[mode].flags, rawMode[mode].twoIov);
}

static double rawLatency(struct raw* r, int iters, int mode) {
  volatile uint64_t* w = (volatile uint64_t*)r->buf;
  OK(mscclppBootstrapBarrier(comm));
  double t0 = 0;
  for (int i = 1; i <= iters + 100; i++) {
    if (i == 101) t0 = now();
    if (rank == 0) {
      rawPost(r, mode, (uint64_t)i);
      rawWait(r, w, (uint64_t)i);
    } else {
      rawWait(r, w, (uint64_t)i);
      rawPost(r, mode, (uint64_t)i);
    }
  }
  double lat = (now() - t0) / iters / 2 * 1e6;
  while (rawCtxDone != rawCtxPosted) rawPoll(r);
  /* the word counts up again from 1 in the next run */
  OK(mscclppBootstrapBarrier(comm));
  __atomic_store_n(w, 0, __ATOMIC_RELEASE);
  OK(mscclppBootstrapBarrier(comm));
  return lat;
}

static double rawBandwidth(struct raw* r, int rounds) {
  volatile uint64_t* flag = (volatile uint64_t*)(r->buf + 8);
  OK(mscclppBootstrapBarrier(comm));
  double t0 = 0;
  for (int k = 1; k <= rounds + 1; k++) {
    if (k == 2) t0 = now();
    if (rank == 0) {
      for (uint64_t off = 0; off < STREAM_BYTES; off += MIB) {
        while (r->inflight >= STREAM_DEPTH) rawPoll(r);
        ssize_t rc;
        struct iovec iov = {r->buf + 4096 + off, MIB};
        void* desc = fi_mr_desc(r->mr);
        struct fi_rma_iov rma = {r->peerBase + 4096 + off, MIB, r->peerKey};
        struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r->peer, .rma_iov = &rma,
                                 .rma_iov_count = 1, .context = NULL};
        while ((rc = fi_writemsg(r->ep, &msg, FI_COMPLETION)) == -FI_EAGAIN) rawPoll(r);
        if (rc) exit(1);
        r->inflight++;
      }
      rawInject(r, 8, (uint64_t)k); /* ordered behind the data */
      rawWait(r, flag, (uint64_t)k);
      while (r->inflight > 0) rawPoll(r);
    } else {
      rawWait(r, flag, (uint64_t)k);
      rawInject(r, 8, (uint64_t)k);
    }
  }
  return (double)STREAM_BYTES * rounds / (now() - t0) / 1e9;
}

/* A sibling thread that only yields, as the host backend's proxy does when
 * idle: raw latency with it shows what 4 runnable threads on 2 cores cost
 * a ping-pong, apart from anything mscclpp does. */
static int spinnerStop;
static void* spinner(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&spinnerStop, __ATOMIC_ACQUIRE)) sched_yield();
  return NULL;
}

static double rawLatencyWithSibling(struct raw* r, int iters) {
  pthread_t t;
  __atomic_store_n(&spinnerStop, 0, __ATOMIC_RELEASE);
  if (pthread_create(&t, NULL, spinner, NULL) != 0) return 0;
  double lat = rawLatency(r, iters, RAW_INJECT);
  __atomic_store_n(&spinnerStop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  return lat;
}

static void rawClose(struct raw* r) {
  OK(mscclppBootstrapBarrier(comm));
  fi_close(&r->mr->fid);
  fi_close(&r->ep->fid);
  fi_close(&r->av->fid);
  fi_close(&r->cq->fid);
  fi_close(&r->domain->fid);
  fi_close(&r->fabric->fid);
  L.freeinfo(r->info);
  free(r->buf);
}
#endif

/* ---- ours ---------------------------------------------------------------------------- */

static double ourLatency(const mscclppPortChannelDeviceHandle* h, int iters) {
  OK(mscclppBootstrapBarrier(comm));
  double t0 = 0;
  for (int i = 0; i < iters + 100; i++) {
    if (i == 100) t0 = now();
    if (rank == 0) {
      OK(mscclppPortChannelDevicePutWithSignal(h, h->dst, 0, h->src, 64, 8));
      OK(mscclppPortChannelDeviceWait(h));
    } else {
      OK(mscclppPortChannelDeviceWait(h));
      OK(mscclppPortChannelDevicePutWithSignal(h, h->dst, 0, h->src, 64, 8));
    }
  }
  return (now() - t0) / iters / 2 * 1e6;
}

static double ourBandwidth(const mscclppPortChannelDeviceHandle* h, int rounds) {
  OK(mscclppBootstrapBarrier(comm));
  double t0 = 0;
  for (int k = 0; k < rounds + 1; k++) {
    if (k == 1) t0 = now();
    if (rank == 0) {
      for (uint64_t off = 0; off < STREAM_BYTES; off += MIB)
        OK(mscclppPortChannelDevicePut(h, h->dst, 4096 + off, h->src, 4096 + off, MIB));
      OK(mscclppPortChannelDeviceSignal(h));
      OK(mscclppPortChannelDeviceWait(h));
    } else {
      OK(mscclppPortChannelDeviceWait(h));
      OK(mscclppPortChannelDeviceSignal(h));
    }
  }
  return (double)STREAM_BYTES * rounds / (now() - t0) / 1e9;
}

#define MAX_BLOCKS 64


static double median(const double* v, int n) {
  double s[MAX_BLOCKS];
  memcpy(s, v, sizeof(double) * (size_t)n);
  return benchSortMedian(s, n);
}

static double mean(const double* v, int n) {
  double t = 0;
  for (int i = 0; i < n; i++) t += v[i];
  return t / n;
}

/* One figure's blocks: raw[b], ours[b], and ratio[b] = ours / raw. */
struct blocks {
  double raw[MAX_BLOCKS], ours[MAX_BLOCKS], ratio[MAX_BLOCKS];
};

/* percent != 0: ratios as percentages */
static void printBlocks(const char* what, const char* unit, const struct blocks* s, int n, int percent) {
  printf("  %s, per block raw / ours (%s):", what, unit);
  for (int b = 0; b < n; b++)
    printf(percent ? "%s %.2f / %.2f = %.0f%%" : "%s %.2f / %.2f = %.2fx", b ? "," : "", s->raw[b], s->ours[b],
           s->ratio[b] * (percent ? 100 : 1));
  printf("\n");
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  int nBlocks = argc > 3 ? atoi(argv[3]) : 7;
  if (iters < 1 || rounds < 1 || nBlocks < 1 || nBlocks > MAX_BLOCKS) {
    fprintf(stderr, "usage: bench_net [iters >= 1] [rounds >= 1] [blocks 1..%d]\n", MAX_BLOCKS);
    return 2;
  }
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  if (!mscclppNetLibAvailable()) {
    printf("SKIP: %s\n", mscclppNetLibError());
    return 77;
  }
  OK(mscclppCommInitFromEnv(&comm));
  int n = 0;
  mscclppCommRank(comm, &rank);
  mscclppCommSize(comm, &n);
  if (n != 2) {
    fprintf(stderr, "bench_net runs with 2 ranks (mscclpp-run -n 2)\n");
    return 2;
  }
  peer = 1 - rank;
  void* p = NULL;
  OK(mscclppMemAlloc(comm, mscclppMemKindHostShared, 4096 + STREAM_BYTES, &p));
  mscclppConnection_t conn;
  OK(mscclppConnectionCreate(comm, peer, 1, mscclppTransportNet, &conn));
  mscclppRegisteredMemory_t m;
  OK(mscclppMemoryRegister(comm, p, 4096 + STREAM_BYTES, mscclppTransportNet, &m));
  mscclppPortChannelConfig pc = MSCCLPP_PORT_CHANNEL_CONFIG_INITIALIZER;
  pc.tag = 2;
  pc.local = m;
  mscclppPortChannel_t ch;
  OK(mscclppPortChannelCreate(comm, conn, &pc, &ch));
  mscclppPortChannelDeviceHandle h;
  OK(mscclppPortChannelGetDeviceHandle(ch, &h));
  mscclppPortChannelDeviceHandle copyHandle = h;
  copyHandle.flags &= ~MSCCLPP_PORT_CHANNEL_FLAG_INLINE;
  double copyLat = ourLatency(&copyHandle, iters); /* first: the signal's word is not in the signal table yet */

  struct blocks lat, bw;
  memset(&lat, 0, sizeof(lat));
  memset(&bw, 0, sizeof(bw));
  double rawSibLat = 0, rawCqLat = 0;
#ifdef MSCCLPP_HAVE_LIBFABRIC
  struct raw r;
  memset(&r, 0, sizeof(r));
  rawSetup(&r);
  /* raw runs with our proxy thread stopped; ours with it running */
  for (int b = 0; b < nBlocks; b++) {
    OK(mscclppCommProxyStop(comm));
    lat.raw[b] = rawLatency(&r, iters, RAW_INJECT);
    OK(mscclppCommProxyStart(comm));
    lat.ours[b] = ourLatency(&h, iters);
    lat.ratio[b] = lat.ours[b] / lat.raw[b];
  }
  for (int b = 0; b < nBlocks; b++) {
    OK(mscclppCommProxyStop(comm));
    bw.raw[b] = rawBandwidth(&r, rounds);
    OK(mscclppCommProxyStart(comm));
    bw.ours[b] = ourBandwidth(&h, rounds);
    bw.ratio[b] = bw.ours[b] / bw.raw[b];
  }
  OK(mscclppCommProxyStop(comm));
  rawSibLat = rawLatencyWithSibling(&r, iters);
  rawCqLat = rawLatency(&r, iters, RAW_CQ_COMP);
  double probeLat[RAW_MODES] = {0};
  const size_t rmaIovLimit = r.info->tx_attr->rma_iov_limit;
  for (int m = RAW_CQ; m < RAW_MODES; m++)
    if (m != RAW_TWO_IOV || rmaIovLimit >= 2) probeLat[m] = rawLatency(&r, iters, m);
  OK(mscclppCommProxyStart(comm));
  rawClose(&r);
#else
  for (int b = 0; b < nBlocks; b++) {
    lat.ours[b] = ourLatency(&h, iters);
    bw.ours[b] = ourBandwidth(&h, rounds);
  }
#endif
  if (rank == 0) {
    printf("bench_net (%s, %s): %d blocks, each raw then ours; %d round trips / %d x 64 MiB each\n",
           getenv("MSCCLPP_NET_PROVIDER") ? getenv("MSCCLPP_NET_PROVIDER") : "default",
           getenv("MSCCLPP_NET_IFNAME") ? getenv("MSCCLPP_NET_IFNAME") : "", nBlocks, iters, rounds);
    printBlocks("8 B ping-pong half round trip", "us", &lat, nBlocks, 0);
    double ourLat = median(lat.ours, nBlocks);
    printf("  8 B ping-pong, half round trip: raw fi_inject_write %.2f us | port channel putWithSignal %.2f us%s "
           "(medians) | MEDIAN ratio %.2fx (goal <= 1.2x) | means %.2f / %.2f us = %.2fx\n",
           median(lat.raw, nBlocks), ourLat,
           (h.flags & MSCCLPP_PORT_CHANNEL_FLAG_INLINE) ? " (inline)" : " (copy: no inline on Net)",
           median(lat.ratio, nBlocks), mean(lat.raw, nBlocks), mean(lat.ours, nBlocks),
           mean(lat.raw, nBlocks) > 0 ? mean(lat.ours, nBlocks) / mean(lat.raw, nBlocks) : 0);
    printBlocks("1 MiB stream", "GB/s", &bw, nBlocks, 1);
    printf("  1 MiB stream: raw RMA writes %.2f GB/s | port channel put %.2f GB/s (medians) | MEDIAN %.0f%% of raw "
           "(goal >= 90%%) | means %.2f / %.2f GB/s = %.0f%%\n",
           median(bw.raw, nBlocks), median(bw.ours, nBlocks), 100 * median(bw.ratio, nBlocks), mean(bw.raw, nBlocks),
           mean(bw.ours, nBlocks),
           mean(bw.raw, nBlocks) > 0 ? 100 * mean(bw.ours, nBlocks) / mean(bw.raw, nBlocks) : 0);
    printf("  measured once, against the median of ours above:\n");
    printf("  8 B ping-pong, port channel putWithSignal as a copy (write + signal, two messages): %.2f us\n",
           copyLat);
    printf("  8 B ping-pong, raw fi_inject_write with a yielding sibling thread per rank (the host backend's 4 "
           "threads on this machine's cores): %.2f us | ours / that %.2fx\n",
           rawSibLat, rawSibLat > 0 ? ourLat / rawSibLat : 0);
    printf("  8 B ping-pong, raw fi_writemsg with remote CQ data (ours with MSCCLPP_NET_SIGNAL=cq; the word polled): %.2f us "
           "| ours / that %.2fx\n",
           rawCqLat, rawCqLat > 0 ? ourLat / rawCqLat : 0);
#ifdef MSCCLPP_HAVE_LIBFABRIC
    printf("  what that message costs, raw 8 B ping-pongs (the word polled; rma_iov_limit %zu):\n", rmaIovLimit);
    for (int m = RAW_CQ; m < RAW_MODES; m++)
      printf("    %-80s %.2f us\n", rawMode[m].name, probeLat[m]);
#endif
  }
  OK(mscclppBootstrapBarrier(comm));
  OK(mscclppPortChannelDestroy(ch));
  OK(mscclppConnectionDestroy(conn));
  OK(mscclppBootstrapBarrier(comm));
  OK(mscclppMemoryDeregister(m));
  OK(mscclppMemFree(comm, p));
  OK(mscclppCommDestroy(comm));
  return 0;
}
