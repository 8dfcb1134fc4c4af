/* SPDX-License-Identifier: MIT */
/*
 * The GPU backend's packet algorithms, host side (kernels:
 * coll_gpu_packet.cu): a call's grid, what it stages, the launch. The
 * one-step kernels serve allreduce, reduce-scatter, allgather and
 * all-to-all; the two-phase one (packet2) allreduce.
 *
 * A packet kernel reads and writes only this rank's buffers: the data
 * travels as packets into the peers' scratch, which every rank maps from
 * setup on. So a call exports nothing and waits for no peer, whatever its
 * buffers are (cuMem, pool or small cudaMalloc allocations included): no
 * export round trip, no staging for sharing, and no barrier but the
 * packets' own flags.
 */
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/gpu/coll_gpu_state.h"
#include "core/error.h"
#include "core/log.h"

#ifdef MSCCLPP_HAVE_CUDA

#include "gpu/gpu.h"

/* The three grids of the one-step kernels (coll_gpu.h), by the bytes of
 * one slot's message: an allreduce's input, a block of the others' (what
 * one rank sends one peer). */
#define PACKET_SMALL_BYTES (4u << 10) /* one block of MSCCLPP_COLL_GPU_PACKET_THREADS: a packet per thread (8 KiB, two per thread, was slower) */
/* Up to here 16 blocks: with 4 ranks, 64 KiB is faster on 16 than on 33
 * (bench/HISTORY.md, "Collectives: packet grids"). */
#define PACKET_MID_BYTES (64u << 10)
#define PACKET_MID_BLOCKS 16u
_Static_assert(PACKET_MID_BYTES * 2 <= MSCCLPP_COLL_GPU_LLMID_SLOT, "a mid message fits one slot of packets");

/* The packet kernels' grid: the same for every packet kernel of a grid's
 * size class, whatever the collective (coll_gpu_packet.cu, LlRounds, says
 * why it must be); blocks without packets only advance their counters. The
 * one-step kernels pick the class by the bytes each slot receives, which
 * fixes the chunks and rounds as it does for an allreduce of that size. */
static void packetGrid(const struct mscclppCollGpu* g, size_t slotBytes, struct mscclppCollGpuLaunch* L) {
  L->nthreads = MSCCLPP_COLL_GPU_PACKET_THREADS;
  if (L->algo == MSCCLPP_COLL_GPU_ALGO_PACKET2) {
    L->nblocks = g->packetBlocks;
  } else if (slotBytes <= PACKET_SMALL_BYTES) {
    L->nblocks = 1;
    L->llGrid = MSCCLPP_COLL_GPU_LL_SMALL;
  } else if (slotBytes <= PACKET_MID_BYTES) {
    L->nblocks = g->packetBlocks < PACKET_MID_BLOCKS ? g->packetBlocks : PACKET_MID_BLOCKS;
    L->llGrid = MSCCLPP_COLL_GPU_LL_MID;
  } else {
    L->nblocks = g->packetBlocks;
    L->llGrid = MSCCLPP_COLL_GPU_LL_BIG;
  }
}

/* In place as coll.h defines it for the collective, which the one-step
 * kernels run as they are (each says why): allgather's input is its
 * output's block `rank`, reduce-scatter's output is its input's block
 * `rank`, all-to-all's input is its output. */
static int inPlace(const struct mscclppCollArgs* a, int rank, size_t block) {
  const uint8_t* send = (const uint8_t*)a->send;
  const uint8_t* recv = (const uint8_t*)a->recv;
  switch (a->kind) {
    case MSCCLPP_COLL_ALLGATHER:
      return send == recv + (size_t)rank * block;
    case MSCCLPP_COLL_REDUCESCATTER:
      return recv == send + (size_t)rank * block;
    default:
      return send == recv;
  }
}

mscclppResult_t mscclppCollGpuRunPacket(struct mscclppComm* comm, struct mscclppCollGpu* g,
                                        const struct mscclppCollArgs* a, size_t inBytes, size_t outBytes,
                                        struct mscclppCollGpuLaunch* L) {
  const uint8_t* send = (const uint8_t*)a->send;
  uint8_t* recv = (uint8_t*)a->recv;
  const size_t block = a->count * a->typeSize; /* an allreduce's input; a block of the others' */
  if (a->kind != MSCCLPP_COLL_ALLREDUCE && send < recv + outBytes && recv < send + inBytes &&
      !inPlace(a, g->rank, block)) {
    /* Input and output overlap otherwise: a thread could overwrite input
     * that another still has to send. The input goes aside (a copy on the
     * stream, into a buffer of this rank: still nothing for the peers). */
    void* aside = NULL;
    MSCCLPP_RETURN_ON_ERROR(mscclppCollGpuStageBuffer(g, 0, inBytes, &aside));
    MSCCLPP_RETURN_ON_ERROR(mscclppGpuMemcpyOnAppStream(a->stream, aside, send, inBytes));
    send = (const uint8_t*)aside;
  }
  L->send[g->rank] = send;
  L->recv[g->rank] = recv;
  /* (vec16, for the packet kernels: every word of every block is 8-byte
   * aligned, so loadWord and storeWord move it in one access) */
  uintptr_t bits = (uintptr_t)send | (uintptr_t)recv;
  if (a->kind != MSCCLPP_COLL_ALLREDUCE) bits |= (uintptr_t)block;
  L->vec16 = (bits & 7) == 0;
  if (a->kind == MSCCLPP_COLL_ALLGATHER || a->kind == MSCCLPP_COLL_ALLTOALL) {
    L->type = mscclppUint8; /* copy-only: bytes */
    L->count = block;
  }
  packetGrid(g, block, L);
  return mscclppCollGpuLaunchKernel(comm, g, L, NULL, NULL, a->stream,
                                    a->kind == MSCCLPP_COLL_ALLREDUCE ? "allreduce" : mscclppCollKindName(a->kind));
}

#endif /* MSCCLPP_HAVE_CUDA */
