/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's board (coll_gpu_state.h): zero-copy ("direct")
 * algorithms need every rank's user buffers mapped in every rank. At each
 * such call every rank writes, into its board slot for the call's sequence
 * number, the CUDA IPC handle, allocation id and offset of its send and
 * receive buffers, then reads the peers' slots (a host-side rendezvous of
 * the ranks of this host, bounded by MSCCLPP_TIMEOUT and the abort flag; it
 * waits for the peers' host threads to reach the same call, not for their
 * GPUs). A peer allocation is opened once (cudaIpcOpenMemHandle) and cached
 * by (peer, allocation id): the driver's buffer id is unique for the
 * process's life, so an address reused by a new allocation is never
 * mistaken for the old one.
 */
#ifdef MSCCLPP_HAVE_CUDA

#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "coll/gpu/coll_gpu_state.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"
#include "gpu/abort.h"

/* Describe a buffer of this rank for the board, or say it must be staged. */
mscclppResult_t mscclppCollGpuDescribeOwn(struct mscclppCollGpu* g, const void* p, struct boardBuf* b, int* shareable) {
  struct mscclppGpuPtrInfo info;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcQueryPointer(p, &info));
  /* cudaMalloc allocations under 2 MiB may share their 2 MiB block with
   * others, and CUDA IPC maps whole blocks: a second handle into an already
   * mapped block fails ("already mapped"). Such buffers are staged. */
  *shareable = info.type == MSCCLPP_GPU_PTR_DEVICE && info.device == g->device && info.bufferId != 0 &&
               info.allocSize >= STAGE_MIN_BYTES;
  if (!*shareable) return mscclppSuccess;
  b->id = info.bufferId;
  b->base = info.allocBase;
  b->offset = (uint64_t)((uintptr_t)p - info.allocBase);
  for (int i = 0; i < g->nown; i++)
    if (g->own[i].id == info.bufferId) {
      memcpy(b->handle, g->own[i].handle, sizeof(b->handle));
      return mscclppSuccess;
    }
  struct ownEntry* e = &g->own[g->ownNext];
  g->ownNext = (g->ownNext + 1) % 64;
  if (g->nown < 64) g->nown++;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcGetHandle((void*)info.allocBase, e->handle));
  e->id = info.bufferId;
  memcpy(b->handle, e->handle, sizeof(b->handle));
  return mscclppSuccess;
}

static mscclppResult_t openPeer(struct mscclppCollGpu* g, int peer, const struct boardBuf* b, uint8_t** ptr) {
  for (int i = 0; i < g->nopen; i++)
    if (g->open[i].peer == peer && g->open[i].id == b->id) {
      *ptr = (uint8_t*)g->open[i].base + b->offset;
      return mscclppSuccess;
    }
  /* A mapping of an older allocation of this peer at the same address is
   * stale (the peer freed it; the new one has another id): close it, or
   * CUDA refuses to map the new one ("already mapped"). The kernels that
   * used it have completed on the peer, which freed it after its call. */
  for (int i = 0; i < g->nopen; i++)
    if (g->open[i].peer == peer && g->open[i].peerBase == b->base) {
      MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcCloseHandle(g->open[i].base));
      g->open[i] = g->open[--g->nopen];
      break;
    }
  if (g->nopen == OPEN_CACHE_MAX)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL,
                      "more than %d distinct peer buffers used in collectives; register fewer", OPEN_CACHE_MAX);
  void* base = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppGpuIpcOpenHandle(b->handle, &base));
  g->open[g->nopen].peer = peer;
  g->open[g->nopen].id = b->id;
  g->open[g->nopen].peerBase = b->base;
  g->open[g->nopen].base = base;
  g->nopen++;
  *ptr = (uint8_t*)base + b->offset;
  return mscclppSuccess;
}

/* Publish my buffers for call `seq` and map every peer's. */
mscclppResult_t mscclppCollGpuRendezvous(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                         const struct boardBuf mine[2], struct mscclppCollGpuLaunch* L,
                                         const uint8_t* localSend, uint8_t* localRecv) {
  uint64_t seq = ++g->seq;
  struct boardEntry* e = &g->board[seq % BOARD_SLOTS];
  memcpy(e->buf, mine, sizeof(e->buf));
  __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
  L->send[g->rank] = localSend;
  L->recv[g->rank] = localRecv;
  mscclppDeadline deadline = mscclppDeadlineIn(comm->params.timeout);
  for (int r = 0; r < g->nranks; r++) {
    if (r == g->rank) continue;
    const struct boardEntry* pe = &g->boardOf[r][seq % BOARD_SLOTS];
    uint32_t spins = 0;
    while (__atomic_load_n(&pe->seq, __ATOMIC_ACQUIRE) != seq) {
      if (++spins % 1024 == 0) {
        if (mscclppAbortIsRaised(g->abort))
          return mscclppErr(mscclppAborted, MSCCLPP_LOG_COLL,
                            "collective: the communicator was aborted while waiting for rank %d", r);
        if (mscclppDeadlinePassed(deadline))
          return mscclppErr(mscclppTimeout, MSCCLPP_LOG_COLL,
                            "collective #%llu: rank %d did not reach the call within MSCCLPP_TIMEOUT",
                            (unsigned long long)seq, r);
        sched_yield();
      }
    }
    struct boardBuf b[2];
    memcpy(b, pe->buf, sizeof(b));
    L->send[r] = NULL;
    L->recv[r] = NULL;
    if (b[0].id != 0) MSCCLPP_RETURN_ON_ERROR(openPeer(g, r, &b[0], (uint8_t**)&L->send[r]));
    if (b[1].id != 0) MSCCLPP_RETURN_ON_ERROR(openPeer(g, r, &b[1], &L->recv[r]));
  }
  return mscclppSuccess;
}

#endif /* MSCCLPP_HAVE_CUDA */
