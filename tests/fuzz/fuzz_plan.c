/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the execution plan loader (src/coll/plan/): any
 * bytes go to mscclppPlanParse, which must refuse them cleanly or return a
 * plan that every executor may run without range checks of its own. For an
 * accepted plan the target builds every rank's program and checks what the
 * executors rely on: every op's channel, semaphore, barrier and remote
 * indices are inside the program's tables, pipeline bodies stay inside
 * their block, and every operand's bytes, for a few chunk sizes, lie inside
 * the buffer it names (the owner's input, output or scratch as the
 * executors size them).
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DMSCCLPP_ENABLE_CUDA=OFF -DMSCCLPP_BUILD_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_plan
 *   build-fuzz/tests/fuzz/fuzz_plan -dict=tests/fuzz/plan.dict build-fuzz/tests/fuzz/corpus_fuzz_plan
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan.h"

#define REQUIRE(cond)              \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  setenv("MSCCLPP_DEBUG", "NONE", 1); /* every refused input would log a warning */
  return 0;
}

/* Bytes of rank r's buffer `space` for chunk size c (as the executors size them). */
static uint64_t spaceBytes(const struct mscclppPlan* plan, int r, int space, uint64_t c) {
  const struct mscclppPlanGpu* g = &plan->gpus[r];
  if (space == MSCCLPP_PLAN_INPUT) return (uint64_t)g->inputChunks * c;
  if (space == MSCCLPP_PLAN_OUTPUT) return (uint64_t)g->outputChunks * c;
  return mscclppPlanScratchBytes(plan, c);
}

static void checkOperands(const struct mscclppPlan* plan, const mscclppPlanProgram* p, const mscclppPlanOp* op,
                          uint64_t c, uint64_t window, uint64_t unit, uint32_t flag) {
  struct mscclppPlanSizes sz;
  memset(&sz, 0, sizeof(sz));
  sz.chunkBytes = c;
  sz.granule = plan->alignment;
  mscclppPlanCallShape shape;
  mscclppPlanCallShapeOf(plan, &sz, flag, mscclppPlanScratchBytes(plan, c), &shape);
  const mscclppPlanRemote* rem = mscclppPlanProgramRemotes(p);
  for (int i = 0; i < op->nSrc + op->nDst; i++) {
    const mscclppPlanOperand* o = &op->operand[i];
    REQUIRE(o->space < MSCCLPP_PLAN_SPACES && o->count > 0);
    int owner = p->rank;
    if (o->flags & MSCCLPP_PLAN_OPERAND_REMOTE) {
      REQUIRE(o->remote < p->nRemotes);
      REQUIRE(rem[o->remote].space == o->space);
      owner = rem[o->remote].rank;
      REQUIRE(owner >= 0 && owner < p->nranks);
    }
    if (o->flags & MSCCLPP_PLAN_OPERAND_PACKET) REQUIRE(o->space == MSCCLPP_PLAN_SCRATCH);
    mscclppPlanRange r = mscclppPlanOperandRange(o, op, &shape, window, unit);
    uint64_t end = r.offset + ((o->flags & MSCCLPP_PLAN_OPERAND_PACKET) ? 2 * r.bytes : r.bytes);
    REQUIRE(r.bytes == 0 || end <= spaceBytes(plan, owner, o->space, c));
  }
}

static void checkProgram(const struct mscclppPlan* plan, const mscclppPlanProgram* p) {
  REQUIRE(p->magic == MSCCLPP_PLAN_PROGRAM_MAGIC && p->version == MSCCLPP_PLAN_PROGRAM_VERSION);
  const mscclppPlanBlock* blocks = mscclppPlanProgramBlocks(p);
  const mscclppPlanOp* ops = mscclppPlanProgramOps(p);
  const mscclppPlanChannel* ch = mscclppPlanProgramChannels(p);
  for (uint32_t i = 0; i < p->nChannels; i++) {
    REQUIRE(ch[i].peer >= 0 && ch[i].peer < p->nranks);
    REQUIRE(ch[i].type == MSCCLPP_PLAN_CHANNEL_MEMORY || ch[i].type == MSCCLPP_PLAN_CHANNEL_PORT);
  }
  for (uint32_t b = 0; b < p->nBlocks; b++) {
    REQUIRE(blocks[b].firstOp <= p->nOps && blocks[b].nOps <= p->nOps - blocks[b].firstOp);
    uint32_t end = blocks[b].firstOp + blocks[b].nOps;
    for (uint32_t i = blocks[b].firstOp; i < end; i++) {
      const mscclppPlanOp* op = &ops[i];
      REQUIRE(op->code < MSCCLPP_PLAN_OPS);
      REQUIRE(op->nSrc + op->nDst <= MSCCLPP_PLAN_MAX_OPERANDS && op->nIds <= MSCCLPP_PLAN_MAX_IDS);
      REQUIRE(op->tbgSize >= 1 && op->tbgId < op->tbgSize);
      if (op->code == MSCCLPP_PLAN_OP_SEM_ACQUIRE || op->code == MSCCLPP_PLAN_OP_SEM_RELEASE) {
        for (int k = 0; k < op->nIds; k++) REQUIRE(op->ids[k] < p->nSemaphores);
      } else {
        for (int k = 0; k < op->nIds; k++) {
          REQUIRE(op->ids[k] < p->nChannels);
          REQUIRE(ch[op->ids[k]].type == op->channelType);
        }
      }
      if (op->code == MSCCLPP_PLAN_OP_BARRIER)
        REQUIRE(op->barrier < p->nBarriers && op->arg0 >= 1 && op->arg0 <= p->nBlocks);
      if (op->code == MSCCLPP_PLAN_OP_PIPELINE) {
        REQUIRE(op->nInner >= 1 && op->nInner <= end - i - 1 && op->arg0 > 0);
        for (uint32_t k = 1; k <= op->nInner; k++) REQUIRE(ops[i + k].code != MSCCLPP_PLAN_OP_PIPELINE);
      }
      static const uint64_t chunkSizes[] = {16, 48, 4096};
      for (int s = 0; s < 3; s++) {
        uint64_t c = chunkSizes[s] / p->alignment * p->alignment;
        if (c == 0) c = p->alignment;
        checkOperands(plan, p, op, c, 0, UINT64_MAX, 1);
        checkOperands(plan, p, op, c, 0, UINT64_MAX, 2);
        checkOperands(plan, p, op, c, c, c, 2);
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct mscclppPlan* plan = NULL;
  if (mscclppPlanParse((const char*)data, size, "<fuzz>", &plan) != mscclppSuccess) return 0;
  REQUIRE(plan->nranks >= 1 && plan->chunksPerBlock >= 1);
  for (int r = 0; r < plan->nranks; r++) {
    mscclppPlanProgram* p = NULL;
    if (mscclppPlanProgramBuild(plan, r, &p) != mscclppSuccess) continue;
    checkProgram(plan, p);
    free(p);
  }
  mscclppPlanRelease(plan);
  return 0;
}
