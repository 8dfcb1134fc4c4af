/* SPDX-License-Identifier: MIT */
/*
 * The host executor's thread blocks (plan_host_ctx.h): the calling thread
 * plays every block of the program in turn. A block runs ops until one
 * must wait (a signal not yet arrived, a barrier others have not reached,
 * a semaphore at 0, LL packets of this execution not yet written), then the
 * next block runs; an op that waits keeps how far it got (channels already
 * waited for, packets already seen), so running it again goes on from
 * there. Ops that only wait for the proxy (a full FIFO, a flush) wait in
 * place: the proxy makes progress whatever the blocks do. A sweep of every
 * block that moves nothing waits a little (mscclppHostWaitBackoff); the
 * communicator's abort ends the call at once, and MSCCLPP_TIMEOUT without
 * progress fails it naming what each block waits for.
 *
 * What each op does is plan_program.h's list; addresses come from
 * mscclppPlanOperandRange, as on the GPU. LL packets are LL16
 * (mscclpp/packet.h), as MSCCL++'s executor uses by default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan_host_ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/abort.h"
#include "mscclpp/packet.h"

struct block {
  uint32_t pc, end;            /* next op; end of the block's ops */
  int inPipe;                  /* inside a PIPELINE's body */
  uint32_t pipeStart, pipeEnd; /* its body */
  uint64_t iter, nIter, unit;  /* iteration, iterations, unit bytes */
  uint32_t sub;                /* progress inside the current op: channels, semaphores, or packet operand */
  uint64_t subPkt;             /* ... and packets of that operand seen */
  uint64_t barrierTarget;      /* BARRIER: arrivals that release this block */
  int arrived;
  int done;
};

struct run {
  struct mscclppComm* comm;
  struct planCall* call;
  struct mscclppPlanHostCtx* x;
  const mscclppPlanProgram* p;
  const mscclppPlanOp* ops;
  const mscclppPlanChannel* ch;
  struct block* blocks;
  uint64_t barrierCount[MSCCLPP_PLAN_MAX_BARRIERS];
};

/* ---- addresses ------------------------------------------------------------------- */

static mscclppPlanRange rangeOf(const struct run* r, const struct block* b, const mscclppPlanOp* op,
                                const mscclppPlanOperand* o) {
  uint64_t window = b->inPipe ? b->iter * b->unit : 0, unit = b->inPipe ? b->unit : UINT64_MAX;
  return mscclppPlanOperandRange(o, op, &r->call->shape, window, unit);
}

/* The operand's first byte (its packets' first byte for a packet operand). */
static uint8_t* addrOf(const struct run* r, const mscclppPlanOperand* o, const mscclppPlanRange* rg) {
  uint8_t* base = (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) ? r->x->remotes[o->remote] : r->call->local[o->space];
  return base + rg->offset;
}

/* Offset of the operand in its owner's region (port channel puts address regions). */
static uint64_t regionOffsetOf(const struct run* r, const mscclppPlanOperand* o, const mscclppPlanRange* rg) {
  uint64_t base = (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) ? r->x->remoteOff[o->remote] : r->call->mine.off[o->space];
  return base + rg->offset;
}

/* ---- LL16 packets ------------------------------------------------------------------ */

/* Advance *seen over the packets of [pk, + count) that carry `flag`; 1 when all do. */
static int packetsArrived(const uint8_t* pk, uint64_t count, uint32_t flag, uint64_t* seen) {
  const mscclppLLPacket16* p = (const mscclppLLPacket16*)pk;
  uint64_t data;
  while (*seen < count && mscclppLL16Check(mscclppLL16Load(&p[*seen]), flag, &data)) (*seen)++;
  return *seen == count;
}

/* The data of packets that have all arrived. */
static void packetsRead(const uint8_t* pk, uint64_t bytes, uint32_t flag, uint8_t* out) {
  const mscclppLLPacket16* p = (const mscclppLLPacket16*)pk;
  uint64_t n = mscclppPacketCount16(bytes);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = 0;
    int ok = mscclppLL16Check(mscclppLL16Load(&p[i]), flag, &v);
    (void)ok; /* arrived: checked before (a packet is rewritten only by the next execution) */
    uint64_t off = i * MSCCLPP_LL16_DATA_BYTES;
    uint32_t m = bytes - off < MSCCLPP_LL16_DATA_BYTES ? (uint32_t)(bytes - off) : MSCCLPP_LL16_DATA_BYTES;
    mscclppPacketScatter(out + off, v, m);
  }
}

/* 1 once every packet operand of op in operand[from, to) has arrived
 * (b->sub, b->subPkt: how far it got). */
static int opPacketsArrived(const struct run* r, struct block* b, const mscclppPlanOp* op, int from, int to) {
  if (b->sub < (uint32_t)from) {
    b->sub = (uint32_t)from;
    b->subPkt = 0;
  }
  for (; b->sub < (uint32_t)to; b->sub++, b->subPkt = 0) {
    const mscclppPlanOperand* o = &op->operand[b->sub];
    if (!(o->flags & MSCCLPP_PLAN_OPERAND_PACKET)) continue;
    mscclppPlanRange rg = rangeOf(r, b, op, o);
    if (!packetsArrived(addrOf(r, o, &rg), mscclppPacketCount16(rg.bytes), r->call->shape.flag, &b->subPkt)) return 0;
  }
  return 1;
}

/* ---- failures ---------------------------------------------------------------------- */

/* The abort is up (a lost peer, a timeout elsewhere, a port channel's
 * failure it recorded): its error. */
static mscclppResult_t failAborted(const struct run* r) {
  mscclppResult_t e = mscclppSuccess;
  if (mscclppCommAsyncError(r->comm, &e) != mscclppSuccess || e == mscclppSuccess) e = mscclppAborted;
  return mscclppErrWrap(e, MSCCLPP_LOG_COLL, "execution plan %s on rank %d: the communicator is aborted", r->call->name,
                        r->x->rank);
}

/* What block b waits for, in words. */
static void describeWait(const struct run* r, uint32_t bi, char* out, size_t len) {
  const struct block* b = &r->blocks[bi];
  const mscclppPlanOp* op = &r->ops[b->pc];
  const uint32_t at = b->pc - mscclppPlanProgramBlocks(r->p)[bi].firstOp;
  const char* name = mscclppPlanOpName((mscclppPlanOpCode)op->code);
  if ((op->code == MSCCLPP_PLAN_OP_WAIT || op->code == MSCCLPP_PLAN_OP_RELAXED_WAIT) && b->sub < op->nIds) {
    const mscclppPlanChannel* c = &r->ch[op->ids[b->sub]];
    snprintf(out, len, "thread block %u, op %u: %s for a signal from rank %d (%s channel %u)", bi, at, name, c->peer,
             c->type == MSCCLPP_PLAN_CHANNEL_MEMORY ? "memory" : "port", c->typeIndex);
  } else if (op->code == MSCCLPP_PLAN_OP_BARRIER) {
    snprintf(out, len, "thread block %u, op %u: barrier %u of %u thread blocks", bi, at, op->barrier, op->arg0);
  } else if (op->code == MSCCLPP_PLAN_OP_SEM_ACQUIRE && b->sub < op->nIds) {
    snprintf(out, len, "thread block %u, op %u: sem_acquire of semaphore %u", bi, at, op->ids[b->sub]);
  } else {
    snprintf(out, len, "thread block %u, op %u: %s, for LL packets of execution %u (src_buff[%u], %llu packets seen)",
             bi, at, name, r->call->shape.flag, b->sub, (unsigned long long)b->subPkt);
  }
}

static mscclppResult_t failTimeout(const struct run* r) {
  char why[1024];
  int n = snprintf(why, sizeof(why),
                   "execution plan %s on rank %d: no progress for MSCCLPP_TIMEOUT (%.1f s) (did every rank make the "
                   "same calls?); waiting: ",
                   r->call->name, r->x->rank, r->x->timeout);
  int shown = 0;
  for (uint32_t bi = 0; bi < r->p->nBlocks && n > 0 && (size_t)n < sizeof(why) - 2; bi++) {
    if (r->blocks[bi].done) continue;
    if (shown == 3) {
      n += snprintf(why + n, sizeof(why) - (size_t)n, "; ...");
      break;
    }
    char one[256];
    describeWait(r, bi, one, sizeof(one));
    n += snprintf(why + n, sizeof(why) - (size_t)n, "%s%s", shown ? "; " : "", one);
    shown++;
  }
  return mscclppAbortRaisef(r->x->abort, mscclppTimeout, "%s", why);
}

/* ---- ops ---------------------------------------------------------------------------- */

/* A port channel call's result: its failure is recorded in the abort. */
#define PORT_CALL(r, expr)                               \
  do {                                                   \
    if ((expr) != mscclppSuccess) return failAborted(r); \
  } while (0)

static mscclppResult_t opPut(const struct run* r, const struct block* b, const mscclppPlanOp* op) {
  struct mscclppPlanHostCtx* x = r->x;
  for (int i = 0; i < op->nSrc; i++) {
    const mscclppPlanOperand *s = &op->operand[i], *d = &op->operand[op->nSrc + i];
    mscclppPlanRange sr = rangeOf(r, b, op, s), dr = rangeOf(r, b, op, d);
    uint64_t bytes = sr.bytes < dr.bytes ? sr.bytes : dr.bytes;
    if (op->channelType == MSCCLPP_PLAN_CHANNEL_MEMORY) {
      if (bytes > 0) memmove(addrOf(r, d, &dr), addrOf(r, s, &sr), bytes);
      continue;
    }
    const mscclppPortChannelDeviceHandle* h = &x->portH[op->ids[i]];
    uint64_t dOff = regionOffsetOf(r, d, &dr), sOff = regionOffsetOf(r, s, &sr);
    if (op->code == MSCCLPP_PLAN_OP_PUT) {
      if (bytes > 0) PORT_CALL(r, mscclppPortChannelDevicePut(h, h->dst, dOff, h->src, sOff, bytes));
    } else if (bytes == 0) { /* nothing of this pair in the window; the peer still waits for the signal */
      PORT_CALL(r, mscclppPortChannelDeviceSignal(h));
      if (op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH) PORT_CALL(r, mscclppPortChannelDeviceFlush(h));
    } else if (op->code == MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL) {
      PORT_CALL(r, mscclppPortChannelDevicePutWithSignal(h, h->dst, dOff, h->src, sOff, bytes));
    } else {
      PORT_CALL(r, mscclppPortChannelDevicePutWithSignalAndFlush(h, h->dst, dOff, h->src, sOff, bytes));
    }
  }
  return mscclppSuccess;
}

/* PUT_PACKETS and READ_PUT_PACKETS: packets to peers' scratch. */
static mscclppResult_t opPutPackets(const struct run* r, const struct block* b, const mscclppPlanOp* op) {
  struct mscclppPlanHostCtx* x = r->x;
  const uint32_t flag = r->call->shape.flag;
  const int reads = op->code == MSCCLPP_PLAN_OP_READ_PUT_PACKETS;
  for (int i = 0; i < op->nDst; i++) {
    const mscclppPlanOperand *s = &op->operand[reads ? 0 : i], *d = &op->operand[op->nSrc + i];
    mscclppPlanRange sr = rangeOf(r, b, op, s), dr = rangeOf(r, b, op, d);
    if (sr.bytes == 0) continue;
    if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT) { /* packets as they are, 2 bytes per data byte */
      const mscclppPortChannelDeviceHandle* h = &x->portH[op->ids[i]];
      PORT_CALL(r, mscclppPortChannelDevicePut(h, h->dst, regionOffsetOf(r, d, &dr), h->src, regionOffsetOf(r, s, &sr),
                                               2 * sr.bytes));
      continue;
    }
    const uint8_t* data = addrOf(r, s, &sr);
    if (reads) { /* this rank's packets, arrived: their data, rewritten with the flag (one store per half) */
      packetsRead(data, sr.bytes, flag, x->tmp);
      data = x->tmp;
    }
    mscclppPutPackets16(addrOf(r, d, &dr), data, sr.bytes, 0, 1, flag);
  }
  return mscclppSuccess;
}

/* The reductions: dst[0] = src[0] op src[1] op ..., then the result to
 * dst[1..] (plain, or packets). */
static void opReduce(const struct run* r, const struct block* b, const mscclppPlanOp* op) {
  struct mscclppPlanHostCtx* x = r->x;
  const uint32_t flag = r->call->shape.flag;
  uint8_t *acc = x->tmp, *other = x->tmp + x->tmpBytes;
  mscclppPlanRange r0 = rangeOf(r, b, op, &op->operand[0]);
  const uint64_t bytes = r0.bytes;
  if (bytes == 0) return;
  const size_t elems = bytes / r->call->typeSize;
  memcpy(acc, addrOf(r, &op->operand[0], &r0), bytes);
  for (int i = 1; i < op->nSrc; i++) {
    const mscclppPlanOperand* s = &op->operand[i];
    mscclppPlanRange sr = rangeOf(r, b, op, s);
    const uint8_t* v = addrOf(r, s, &sr);
    if (s->flags & MSCCLPP_PLAN_OPERAND_PACKET) {
      packetsRead(v, bytes, flag, other);
      v = other;
    }
    r->call->reduce(acc, v, elems);
  }
  for (int i = 0; i < op->nDst; i++) {
    const mscclppPlanOperand* d = &op->operand[op->nSrc + i];
    mscclppPlanRange dr = rangeOf(r, b, op, d);
    if (d->flags & MSCCLPP_PLAN_OPERAND_PACKET)
      mscclppPutPackets16(addrOf(r, d, &dr), acc, bytes, 0, 1, flag);
    else
      memmove(addrOf(r, d, &dr), acc, bytes);
  }
}

/* Run op for block b: *blocked when it must wait (b keeps its progress). */
static mscclppResult_t runOp(struct run* r, struct block* b, const mscclppPlanOp* op, int* blocked) {
  struct mscclppPlanHostCtx* x = r->x;
  *blocked = 0;
  switch (op->code) {
    case MSCCLPP_PLAN_OP_NOP:
      return mscclppSuccess; /* one thread per block: nothing to synchronize */
    case MSCCLPP_PLAN_OP_BARRIER: {
      uint64_t* count = &r->barrierCount[op->barrier];
      if (!b->arrived) {
        b->barrierTarget = (*count / op->arg0 + 1) * op->arg0; /* the end of the current round */
        (*count)++;
        b->arrived = 1;
      }
      if (*count < b->barrierTarget) {
        *blocked = 1;
        return mscclppSuccess;
      }
      b->arrived = 0;
      return mscclppSuccess;
    }
    case MSCCLPP_PLAN_OP_SIGNAL:
    case MSCCLPP_PLAN_OP_RELAXED_SIGNAL:
      /* the relaxed form with release order too: the input area a peer may
       * read after it was written by this call's stage-in (the GPU
       * executor's channelOp says why) */
      for (int i = 0; i < op->nIds; i++) {
        if (op->channelType == MSCCLPP_PLAN_CHANNEL_PORT)
          PORT_CALL(r, mscclppPortChannelDeviceSignal(&x->portH[op->ids[i]]));
        else
          mscclppMemoryChannelDeviceSignal(&x->memH[op->ids[i]]);
      }
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_WAIT:
    case MSCCLPP_PLAN_OP_RELAXED_WAIT:
      /* a poll consumes with acquire order, enough for the relaxed form too */
      for (; b->sub < op->nIds; b->sub++) {
        uint16_t id = op->ids[b->sub];
        int got = op->channelType == MSCCLPP_PLAN_CHANNEL_PORT ? mscclppPortChannelDevicePoll(&x->portH[id])
                                                               : mscclppMemoryChannelDevicePoll(&x->memH[id]);
        if (!got) {
          *blocked = 1;
          return mscclppSuccess;
        }
      }
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_FLUSH:
      for (int i = 0; i < op->nIds; i++) PORT_CALL(r, mscclppPortChannelDeviceFlush(&x->portH[op->ids[i]]));
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_PUT:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL:
    case MSCCLPP_PLAN_OP_PUT_WITH_SIGNAL_AND_FLUSH:
      return opPut(r, b, op);
    case MSCCLPP_PLAN_OP_GET:
    case MSCCLPP_PLAN_OP_COPY:
      for (int i = 0; i < op->nSrc; i++) {
        const mscclppPlanOperand *s = &op->operand[i], *d = &op->operand[op->nSrc + i];
        mscclppPlanRange sr = rangeOf(r, b, op, s), dr = rangeOf(r, b, op, d);
        uint64_t bytes = sr.bytes < dr.bytes ? sr.bytes : dr.bytes;
        if (bytes > 0) memmove(addrOf(r, d, &dr), addrOf(r, s, &sr), bytes);
      }
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_COPY_PACKETS: {
      mscclppPlanRange sr = rangeOf(r, b, op, &op->operand[0]), dr = rangeOf(r, b, op, &op->operand[1]);
      mscclppPutPackets16(addrOf(r, &op->operand[1], &dr), addrOf(r, &op->operand[0], &sr), sr.bytes, 0, 1,
                          r->call->shape.flag);
      return mscclppSuccess;
    }
    case MSCCLPP_PLAN_OP_UNPACK_PACKETS: {
      if (!opPacketsArrived(r, b, op, 0, 1)) {
        *blocked = 1;
        return mscclppSuccess;
      }
      mscclppPlanRange sr = rangeOf(r, b, op, &op->operand[0]), dr = rangeOf(r, b, op, &op->operand[1]);
      packetsRead(addrOf(r, &op->operand[0], &sr), sr.bytes, r->call->shape.flag, addrOf(r, &op->operand[1], &dr));
      return mscclppSuccess;
    }
    case MSCCLPP_PLAN_OP_READ_PUT_PACKETS:
      if (!opPacketsArrived(r, b, op, 0, 1)) {
        *blocked = 1;
        return mscclppSuccess;
      }
      return opPutPackets(r, b, op);
    case MSCCLPP_PLAN_OP_PUT_PACKETS:
      return opPutPackets(r, b, op);
    case MSCCLPP_PLAN_OP_REDUCE:
    case MSCCLPP_PLAN_OP_REDUCE_SEND:
    case MSCCLPP_PLAN_OP_READ_REDUCE:
    case MSCCLPP_PLAN_OP_READ_REDUCE_SEND:
    case MSCCLPP_PLAN_OP_REDUCE_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_SEND_PACKETS:
    case MSCCLPP_PLAN_OP_REDUCE_COPY_SEND_PACKETS:
      if (!opPacketsArrived(r, b, op, 1, op->nSrc)) {
        *blocked = 1;
        return mscclppSuccess;
      }
      opReduce(r, b, op);
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_SEM_ACQUIRE:
      for (; b->sub < op->nIds; b->sub++) {
        int64_t* s = &x->sem[op->ids[b->sub]];
        if (*s <= 0) {
          *blocked = 1;
          return mscclppSuccess;
        }
        (*s)--;
      }
      return mscclppSuccess;
    case MSCCLPP_PLAN_OP_SEM_RELEASE:
      for (int i = 0; i < op->nIds; i++) x->sem[op->ids[i]]++;
      return mscclppSuccess;
    default:
      return mscclppErr(mscclppInternalError, MSCCLPP_LOG_COLL, "execution plan %s: op code %u has no host executor",
                        r->call->name, op->code);
  }
}

/* Run block b until it waits or ends; *moved when it ran an op. */
static mscclppResult_t advance(struct run* r, struct block* b, int* moved) {
  while (!b->done) {
    if (b->inPipe && b->pc == b->pipeEnd) {
      if (++b->iter < b->nIter)
        b->pc = b->pipeStart;
      else
        b->inPipe = 0;
      continue;
    }
    if (b->pc == b->end) {
      b->done = 1;
      *moved = 1;
      break;
    }
    const mscclppPlanOp* op = &r->ops[b->pc];
    if (op->code == MSCCLPP_PLAN_OP_PIPELINE) {
      b->pipeStart = b->pc + 1;
      b->pipeEnd = b->pipeStart + op->nInner;
      b->nIter = mscclppPlanPipelineIterations(op, &r->call->shape);
      b->unit = op->arg0;
      b->iter = 0;
      b->inPipe = b->nIter > 0;
      b->pc = b->nIter > 0 ? b->pipeStart : b->pipeEnd;
      *moved = 1;
      continue;
    }
    int blocked = 0;
    MSCCLPP_RETURN_ON_ERROR(runOp(r, b, op, &blocked));
    if (blocked) return mscclppSuccess;
    b->sub = 0;
    b->subPkt = 0;
    b->pc++;
    *moved = 1;
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanHostExecute(struct mscclppComm* comm, struct planCall* call) {
  struct mscclppPlanHostCtx* x = call->x;
  struct run r;
  memset(&r, 0, sizeof(r));
  r.comm = comm;
  r.call = call;
  r.x = x;
  r.p = x->prog;
  r.ops = mscclppPlanProgramOps(x->prog);
  r.ch = mscclppPlanProgramChannels(x->prog);
  if (mscclppAbortIsRaised(x->abort)) return failAborted(&r);
  r.blocks = (struct block*)calloc(r.p->nBlocks + 1, sizeof(*r.blocks));
  if (r.blocks == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "out of memory");
  const mscclppPlanBlock* blocks = mscclppPlanProgramBlocks(r.p);
  for (uint32_t i = 0; i < r.p->nBlocks; i++) {
    r.blocks[i].pc = blocks[i].firstOp;
    r.blocks[i].end = blocks[i].firstOp + blocks[i].nOps;
  }
  mscclppResult_t res = mscclppSuccess;
  uint64_t idleSince = 0;
  for (;;) {
    int moved = 0, left = 0;
    for (uint32_t i = 0; i < r.p->nBlocks && res == mscclppSuccess; i++) {
      if (r.blocks[i].done) continue;
      res = advance(&r, &r.blocks[i], &moved);
      left |= !r.blocks[i].done;
    }
    if (res != mscclppSuccess || !left) break;
    if (moved) {
      idleSince = 0;
      continue;
    }
    if (mscclppAbortIsRaised(x->abort)) {
      res = failAborted(&r);
      break;
    }
    uint64_t now = mscclppHostClockNs();
    if (idleSince == 0) idleSince = now;
    if ((double)(now - idleSince) > x->timeout * 1e9) {
      res = failTimeout(&r);
      break;
    }
    mscclppHostWaitBackoff(now - idleSince);
  }
  free(r.blocks);
  return res;
}
