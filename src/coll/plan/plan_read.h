/* SPDX-License-Identifier: MIT */
/*
 * The plan loader's parts (only with jansson): plan_read.c reads typed
 * fields of a jansson document and words the errors (naming the JSON path
 * and the value), plan_ops.c reads a thread block's channels, remote
 * buffers and ops, plan_load.c the rest of the format and the checks across
 * thread blocks and ranks (its top comment describes the format).
 */
#ifndef MSCCLPP_SRC_COLL_PLAN_PLAN_READ_H_
#define MSCCLPP_SRC_COLL_PLAN_PLAN_READ_H_

#ifdef MSCCLPP_HAVE_JANSSON

#include <jansson.h>
#include <stdint.h>

#include "coll/plan/plan.h"

/* The loader's state. */
struct reader {
  const char* source; /* the file, or "<string>" */
  struct mscclppPlan* plan;
  int failed; /* an error was reported (the first one counts) */
  int quiet;  /* log the error at INFO (the caller warns) */
};

/* Report the plan's error: "execution plan <source>: <text>"; returns code. */
mscclppResult_t mscclppPlanReadFail(struct reader* rd, mscclppResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FAIL(rd, ...) mscclppPlanReadFail((rd), mscclppInvalidArgument, __VA_ARGS__)

/* A JSON value in words, for messages: "\"abc\"", "3.5", "true", "an array". */
const char* mscclppPlanReadDescribe(const json_t* v, char* buf, size_t len);
/* A JSON path for messages (cut when too long: it only names the place). */
void mscclppPlanReadPath(char* out, size_t len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* "at.key", or "key" at the top. */
void mscclppPlanReadJoin(char* out, size_t len, const char* at, const char* key);

/* obj[key] (at names obj): *out NULL when absent and not required; a
 * missing required field is an error. The typed forms check the type (and
 * range) too and fill `def` when an optional field is absent. Numbers are
 * whole numbers in [lo, hi] (the loader reads every number as a double). */
mscclppResult_t mscclppPlanReadField(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                     int required, json_t** out);
mscclppResult_t mscclppPlanReadWhole(struct reader* rd, const json_t* v, const char* path, double lo, double hi,
                                     uint64_t* out);
mscclppResult_t mscclppPlanReadWholeField(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                          int required, uint64_t def, double lo, double hi, uint64_t* out);
mscclppResult_t mscclppPlanReadU32(struct reader* rd, const json_t* obj, const char* at, const char* key, int required,
                                   uint32_t def, uint32_t lo, uint32_t hi, uint32_t* out);
mscclppResult_t mscclppPlanReadBool(struct reader* rd, const json_t* obj, const char* at, const char* key, int required,
                                    int def, int* out);
mscclppResult_t mscclppPlanReadString(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                      int required, const char** out);
mscclppResult_t mscclppPlanReadArray(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                     int required, json_t** out);
mscclppResult_t mscclppPlanReadObject(struct reader* rd, const json_t* v, const char* path);
/* "i" / "o" / "s" at path. */
mscclppResult_t mscclppPlanReadSpace(struct reader* rd, const char* s, const char* path, uint8_t* out);
/* "memory" / "port" (/ "none" when allowed) at path; "switch" is refused, saying why. */
mscclppResult_t mscclppPlanReadChannelType(struct reader* rd, const char* s, const char* path, int allowNone,
                                           uint8_t* out);
const char* mscclppPlanChannelTypeName(int type);
extern const char* const mscclppPlanSpaceNames[MSCCLPP_PLAN_SPACES];

#define MULTICAST_REFUSED \
  "switch channels (NVLS multicast) are not supported: multicast is not allowed on the machines mscclpp runs on"

/* ---- a rank's thread blocks (plan_ops.c) ---- */

/* A thread block's view: its channels and remote buffers by type. */
struct tbView {
  uint32_t nCh[3];
  uint32_t* ch[3]; /* program channel index of the block's i-th channel of a type */
  uint32_t nRb[3];
  uint32_t* rb[3]; /* rank's remote buffer index of the block's i-th remote buffer of a type */
};

struct gpuReader {
  struct reader* rd;
  int rank;
  struct mscclppPlanGpu* g;
  uint32_t opCap;
  /* barrier checks: per barrier id, its num_threadblocks, the blocks using it and how often */
  uint32_t barrierBlocks[MSCCLPP_PLAN_MAX_BARRIERS];
  uint32_t* barrierUses; /* [MAX_BARRIERS][nBlocks]: uses per block (outside pipelines) */
  uint8_t barrierPipelined[MSCCLPP_PLAN_MAX_BARRIERS];
};

/* Read thread block `at`'s channels and remote_buffer_refs into *v. */
mscclppResult_t mscclppPlanReadTbView(struct gpuReader* gr, const json_t* tbj, const char* at, struct tbView* v);
void mscclppPlanTbViewFree(struct tbView* v);
/* Read op `opj` (path at) of thread block tbIndex into the rank's ops. */
mscclppResult_t mscclppPlanReadOp(struct gpuReader* gr, const struct tbView* tb, uint32_t tbIndex, const json_t* opj,
                                  const char* at, int inPipeline);

#endif /* MSCCLPP_HAVE_JANSSON */
#endif /* MSCCLPP_SRC_COLL_PLAN_PLAN_READ_H_ */
