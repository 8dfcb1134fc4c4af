/* SPDX-License-Identifier: MIT */
/*
 * Execution plans in one process (mscclpp/plan.h, src/coll/plan/):
 *   - every plan of tests/plan/data/ loads, with the info its JSON says, and
 *     every rank's program is well formed (indices inside its tables);
 *   - every plan of tests/plan/bad/ (one thing wrong each, written by
 *     make_test_plans.py) is refused with mscclppInvalidArgument and a
 *     message containing the text of bad/expected.txt (the JSON path and the
 *     value);
 *   - the API's argument checks;
 *   - on a one-rank communicator of the host backend: a plan for 2 ranks is
 *     refused by registration and by execution, naming both counts; a
 *     one-rank plan runs through mscclppPlanExecute and, once registered,
 *     through mscclppAllReduce (its run counter moves), but not for the
 *     other in-place form or a size outside its range (the built-in
 *     algorithm runs; mscclppPlanExecute refuses both, saying why);
 *     registering twice, unregistering, a directory of plans for other
 *     rank counts, MSCCLPP_ALGO=allreduce=plan with no plan that matches.
 * Usage: test_plan_load <tests/plan directory>
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/plan/plan.h"
#include "coll/plan/plan_coll.h"
#include "comm/comm.h"
#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/plan.h"

static const char* root; /* tests/plan */

/* mscclppPlanRunCount's answer (a failed call is a failed check). */
static uint64_t runsOf(mscclppComm_t c, mscclppPlan_t plan) {
  uint64_t runs = UINT64_MAX;
  CHECK_RES(mscclppPlanRunCount(c, plan, &runs), mscclppSuccess);
  return runs;
}

#define CHECK_MSG(text)                                                                                      \
  do {                                                                                                       \
    if (strstr(mscclppGetLastError(), (text)) == NULL) {                                                      \
      fprintf(stderr, "%s:%d: the message \"%s\" does not say \"%s\"\n", __FILE__, __LINE__,                   \
              mscclppGetLastError(), (text));                                                                \
      harnessFailures_++;                                                                                    \
    }                                                                                                        \
  } while (0)

/* Calls fn(path) for every *.json of root/sub. Returns how many. */
static int eachPlan(const char* sub, void (*fn)(const char* path)) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/%s", root, sub);
  DIR* d = opendir(dir);
  CHECK(d != NULL);
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    fn(path);
    n++;
  }
  closedir(d);
  return n;
}

/* What every executor relies on in a program (the fuzzer checks the same). */
static void checkProgram(const mscclppPlanProgram* p, int rank, int nranks) {
  CHECK(p->magic == MSCCLPP_PLAN_PROGRAM_MAGIC && p->version == MSCCLPP_PLAN_PROGRAM_VERSION);
  CHECK(p->rank == rank && p->nranks == nranks && p->nBlocks >= 1);
  const mscclppPlanBlock* b = mscclppPlanProgramBlocks(p);
  const mscclppPlanOp* ops = mscclppPlanProgramOps(p);
  const mscclppPlanChannel* ch = mscclppPlanProgramChannels(p);
  const mscclppPlanRemote* rem = mscclppPlanProgramRemotes(p);
  uint32_t total = 0;
  for (uint32_t i = 0; i < p->nBlocks; i++) {
    CHECK(b[i].firstOp == total);
    total += b[i].nOps;
  }
  CHECK(total == p->nOps);
  for (uint32_t i = 0; i < p->nOps; i++) {
    const mscclppPlanOp* op = &ops[i];
    CHECK(op->code < MSCCLPP_PLAN_OPS);
    if (op->code != MSCCLPP_PLAN_OP_SEM_ACQUIRE && op->code != MSCCLPP_PLAN_OP_SEM_RELEASE)
      for (int k = 0; k < op->nIds; k++) CHECK(op->ids[k] < p->nChannels && ch[op->ids[k]].type == op->channelType);
    for (int k = 0; k < op->nSrc + op->nDst; k++)
      if (op->operand[k].flags & MSCCLPP_PLAN_OPERAND_REMOTE)
        CHECK(op->operand[k].remote < p->nRemotes && rem[op->operand[k].remote].space == op->operand[k].space);
  }
  for (uint32_t i = 0; i < p->nChannels; i++) CHECK(ch[i].peer >= 0 && ch[i].peer < nranks);
}

static void loadsWell(const char* path) {
  mscclppPlan_t plan = NULL;
  CHECK_RES(mscclppPlanLoadFile(path, &plan), mscclppSuccess);
  if (plan == NULL) return;
  mscclppPlanInfo info = MSCCLPP_PLAN_INFO_INITIALIZER;
  CHECK_RES(mscclppPlanGetInfo(plan, &info), mscclppSuccess);
  CHECK(info.nranks >= 1 && info.threadblocks >= 1 && info.chunksPerBlock >= 1 && info.threadsPerBlock == 1024);
  CHECK(strncmp(info.name, "test_", 5) == 0);
  for (int r = 0; r < info.nranks; r++) {
    mscclppPlanProgram* p = NULL;
    CHECK_RES(mscclppPlanProgramBuild(plan, r, &p), mscclppSuccess);
    if (p != NULL) checkProgram(p, r, info.nranks);
    free(p);
  }
  mscclppPlanProgram* p = NULL;
  CHECK_RES(mscclppPlanProgramBuild(plan, info.nranks, &p), mscclppInvalidArgument);
  CHECK_RES(mscclppPlanDestroy(plan), mscclppSuccess);
}

static void testGoodPlans(void) {
  CHECK(eachPlan("data", loadsWell) >= 12);
  char path[1024];
  snprintf(path, sizeof(path), "%s/data/allreduce_ll_2.json", root);
  mscclppPlan_t plan = NULL;
  CHECK_RES(mscclppPlanLoadFile(path, &plan), mscclppSuccess);
  if (plan == NULL) return;
  mscclppPlanInfo info = MSCCLPP_PLAN_INFO_INITIALIZER;
  CHECK_RES(mscclppPlanGetInfo(plan, &info), mscclppSuccess);
  CHECK(strcmp(info.name, "test_allreduce_ll_2") == 0 && strcmp(info.collective, "allreduce") == 0);
  CHECK(strcmp(info.protocol, "LL") == 0 && info.nranks == 2 && info.inplace == 0 && info.chunksPerBlock == 2);
  CHECK(info.minMessageBytes == 0 && info.maxMessageBytes == UINT64_MAX && info.threadblocks == 1);
  CHECK_RES(mscclppPlanDestroy(plan), mscclppSuccess);
}

static void testBadPlans(void) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/bad/expected.txt", root);
  FILE* f = fopen(path, "r");
  CHECK(f != NULL);
  if (f == NULL) return;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = '\0';
    char* tab = strchr(line, '\t');
    CHECK(tab != NULL);
    if (tab == NULL) continue;
    *tab = '\0';
    char file[2200];
    snprintf(file, sizeof(file), "%s/bad/%s", root, line);
    mscclppPlan_t plan = NULL;
    mscclppResult_t res = mscclppPlanLoadFile(file, &plan);
    if (res != mscclppInvalidArgument || plan != NULL || strstr(mscclppGetLastError(), tab + 1) == NULL) {
      fprintf(stderr, "FAIL %s: returned %d, message \"%s\", expected one containing \"%s\"\n", line, (int)res,
              mscclppGetLastError(), tab + 1);
      harnessFailures_++;
    }
    /* the message starts with the file */
    CHECK(strstr(mscclppGetLastError(), line) != NULL);
    n++;
  }
  fclose(f);
  CHECK(n >= 27);
}

static void testArguments(void) {
  mscclppPlan_t plan = NULL;
  CHECK_RES(mscclppPlanLoadFile(NULL, &plan), mscclppInvalidArgument);
  CHECK_RES(mscclppPlanLoadFile("/nonexistent/plan.json", &plan), mscclppInvalidArgument);
  CHECK_MSG("cannot read execution plan /nonexistent/plan.json: No such file or directory");
  CHECK_RES(mscclppPlanLoadString(NULL, 3, &plan), mscclppInvalidArgument);
  CHECK_RES(mscclppPlanLoadString("{}", 2, &plan), mscclppInvalidArgument);
  CHECK_MSG("execution plan <string>: name is missing");
  /* not NUL-terminated: the length counts */
  CHECK_RES(mscclppPlanLoadString("{}garbage", 2, &plan), mscclppInvalidArgument);
  CHECK_MSG("name is missing");
  CHECK_RES(mscclppPlanDestroy(NULL), mscclppInvalidArgument);
  CHECK_RES(mscclppPlanGetInfo(NULL, NULL), mscclppInvalidArgument);
  CHECK(plan == NULL);
}

/* A one-rank allreduce: copy the input to the output, for 8 to 4096 bytes. */
static const char onePlan[] =
    "{\"name\": \"one\", \"collective\": \"allreduce\", \"protocol\": \"Simple\", \"inplace\": false,"
    " \"min_message_size\": 8, \"max_message_size\": 4096,"
    " \"gpus\": [{\"id\": 0, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0,"
    " \"channels\": [], \"remote_buffers\": [],"
    " \"threadblocks\": [{\"id\": 0, \"ops\": [{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0,"
    " \"size\": 1}], \"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]}]}]}]}";

static mscclppComm_t makeComm(void) {
  mscclppUniqueId id;
  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppGetUniqueId(&id), mscclppSuccess);
  CHECK_RES(mscclppCommInitRankFromId(&comm, 1, id, 0), mscclppSuccess);
  return comm;
}

static void testOnCommunicator(void) {
  mscclppComm_t comm = makeComm();
  if (comm == NULL) return;
  char path[1024];
  snprintf(path, sizeof(path), "%s/data/allgather_mem_2.json", root);
  mscclppPlan_t two = NULL, one = NULL;
  CHECK_RES(mscclppPlanLoadFile(path, &two), mscclppSuccess);
  CHECK_RES(mscclppPlanLoadString(onePlan, sizeof(onePlan) - 1, &one), mscclppSuccess);
  if (two == NULL || one == NULL) return;
  int32_t in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = 1000 + i;

  /* a plan for another rank count */
  CHECK_RES(mscclppPlanRegister(comm, two), mscclppInvalidArgument);
  CHECK_MSG("execution plan test_allgather_mem_2 is for 2 ranks; the communicator has 1");
  CHECK_RES(mscclppPlanExecute(comm, two, in, out, 4, mscclppInt32, mscclppSum, NULL), mscclppInvalidArgument);
  CHECK_MSG("is for 2 ranks; the communicator has 1");

  /* explicit runs */
  memset(out, 0xa5, sizeof(out));
  CHECK_RES(mscclppPlanExecute(comm, one, in, out, 13, mscclppInt32, mscclppSum, NULL), mscclppSuccess);
  CHECK(memcmp(in, out, 13 * 4) == 0 && out[13] == (int32_t)0xa5a5a5a5);
  CHECK_RES(mscclppPlanExecute(comm, one, out, out, 13, mscclppInt32, mscclppSum, NULL), mscclppInvalidArgument);
  CHECK_MSG("execution plan one runs out-of-place calls; this call is in-place");
  CHECK_RES(mscclppPlanExecute(comm, one, in, out, 1, mscclppInt32, mscclppSum, NULL), mscclppInvalidArgument);
  CHECK_MSG("execution plan one takes messages of 8 to 4096 bytes (the input's bytes); this call's is 4");
  CHECK_RES(mscclppPlanExecute(comm, NULL, in, out, 1, mscclppInt32, mscclppSum, NULL), mscclppInvalidArgument);

  /* registered: a matching call runs it, the others the built-in algorithm */
  CHECK_RES(mscclppPlanRegister(comm, one), mscclppSuccess);
  CHECK_RES(mscclppPlanRegister(comm, one), mscclppInvalidUsage);
  CHECK_MSG("execution plan one is registered on rank 0 already");
  int n = 0;
  CHECK_RES(mscclppPlanRegisteredCount(comm, &n), mscclppSuccess);
  CHECK(n == 1);
  mscclppPlan_t at = NULL;
  CHECK_RES(mscclppPlanRegisteredAt(comm, 0, &at), mscclppSuccess);
  CHECK(at == one);
  CHECK_RES(mscclppPlanRegisteredAt(comm, 1, &at), mscclppInvalidArgument);
  /* the communicator keeps its own reference */
  CHECK_RES(mscclppPlanDestroy(one), mscclppSuccess);
  uint64_t runs = runsOf(comm, one);
  CHECK_RES(mscclppPlanRunCount(NULL, one, &runs), mscclppInvalidArgument);
  CHECK_RES(mscclppPlanRunCount(comm, one, NULL), mscclppInvalidArgument);
  CHECK_MSG("mscclppPlanRunCount: NULL runs");
  memset(out, 0, sizeof(out));
  CHECK_RES(mscclppAllReduce(in, out, 17, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(memcmp(in, out, 17 * 4) == 0);
  CHECK(runsOf(comm, one) == runs + 1);
  memcpy(out, in, sizeof(out));
  CHECK_RES(mscclppAllReduce(out, out, 17, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess); /* in place */
  CHECK_RES(mscclppAllReduce(in, out, 1, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess);   /* 4 bytes */
  CHECK_RES(mscclppAllReduce(in, out, 200, mscclppInt8, mscclppSum, comm, NULL), mscclppSuccess); /* fits */
  CHECK(runsOf(comm, one) == runs + 2);
  /* MSCCLPP_ALGO=allreduce=plan with nothing that matches: the rules pick */
  snprintf(comm->params.algo, sizeof(comm->params.algo), "allreduce=plan");
  CHECK_RES(mscclppAllReduce(in, out, 1, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK_RES(mscclppAllReduce(in, out, 3, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(runsOf(comm, one) == runs + 3);
  /* MSCCLPP_ALGO naming another algorithm keeps plans out */
  snprintf(comm->params.algo, sizeof(comm->params.algo), "allreduce=rsag");
  CHECK_RES(mscclppAllReduce(in, out, 3, mscclppInt32, mscclppSum, comm, NULL), mscclppSuccess);
  CHECK(runsOf(comm, one) == runs + 3);
  comm->params.algo[0] = '\0';
  CHECK_RES(mscclppPlanUnregister(comm, one), mscclppSuccess); /* the last reference: freed */
  CHECK_RES(mscclppPlanRegisteredCount(comm, &n), mscclppSuccess);
  CHECK(n == 0);

  /* directories */
  int registered = -1;
  CHECK_RES(mscclppPlanRegisterDir(comm, "/nonexistent", &registered), mscclppInvalidArgument);
  CHECK_MSG("cannot read directory /nonexistent");
  snprintf(path, sizeof(path), "%s/data", root);
  CHECK_RES(mscclppPlanRegisterDir(comm, path, &registered), mscclppSuccess);
  CHECK(registered == 0); /* all for 2 to 4 ranks */
  CHECK_RES(mscclppPlanUnregister(comm, two), mscclppInvalidArgument);
  CHECK_MSG("is not registered on rank 0");
  CHECK_RES(mscclppPlanDestroy(two), mscclppSuccess);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
}

int main(int argc, char** argv) {
  harnessInit(argc, argv);
  root = argc > 1 && argv[argc - 1][0] != '-' ? argv[argc - 1] : "tests/plan";
  setenv("MSCCLPP_DEBUG", "NONE", 1); /* the refused plans would each log a warning */
  RUN(testGoodPlans);
  RUN(testBadPlans);
  RUN(testArguments);
  RUN(testOnCommunicator);
  return harnessFinish();
}
