/* SPDX-License-Identifier: MIT */
/* The plan handle's public functions (mscclpp/plan.h): load, destroy, info. */
#include <string.h>

#include "coll/plan/plan.h"
#include "core/error.h"
#include "core/log.h"

MSCCLPP_API mscclppResult_t mscclppPlanLoadFile(const char* path, mscclppPlan_t* plan) {
  if (path == NULL || plan == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanLoadFile: NULL %s",
                      path == NULL ? "path" : "plan");
  struct mscclppPlan* p = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanParseFile(path, &p));
  MSCCLPP_INFO(MSCCLPP_LOG_COLL, "execution plan %s loaded from %s: %s for %d ranks, %s, %s", p->name, path,
               mscclppPlanCollectiveName(p->collective), p->nranks, p->protocol == MSCCLPP_PLAN_LL ? "LL" : "Simple",
               p->inplace ? "in-place" : "out-of-place");
  *plan = p;
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanLoadString(const char* json, size_t len, mscclppPlan_t* plan) {
  if (json == NULL || plan == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanLoadString: NULL %s",
                      json == NULL ? "json" : "plan");
  struct mscclppPlan* p = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanParse(json, len, "<string>", &p));
  *plan = p;
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanDestroy(mscclppPlan_t plan) {
  if (plan == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanDestroy: NULL plan");
  mscclppPlanRelease(plan);
  return mscclppSuccess;
}

MSCCLPP_API mscclppResult_t mscclppPlanGetInfo(mscclppPlan_t plan, mscclppPlanInfo* info) {
  if (plan == NULL || info == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL, "mscclppPlanGetInfo: NULL %s",
                      plan == NULL ? "plan" : "info");
  if (info->structSize != sizeof(mscclppPlanInfo))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_COLL,
                      "mscclppPlanInfo.structSize is %zu, expected %zu: start from MSCCLPP_PLAN_INFO_INITIALIZER",
                      info->structSize, sizeof(mscclppPlanInfo));
  info->name = plan->name;
  info->collective = mscclppPlanCollectiveName(plan->collective);
  info->protocol = plan->protocol == MSCCLPP_PLAN_LL ? "LL" : "Simple";
  info->nranks = plan->nranks;
  info->inplace = plan->inplace;
  info->minMessageBytes = plan->minMessageBytes;
  info->maxMessageBytes = plan->maxMessageBytes;
  info->threadblocks = (int)plan->maxBlocks;
  info->threadsPerBlock = (int)plan->threadsPerBlock;
  info->chunksPerBlock = (int)plan->chunksPerBlock;
  return mscclppSuccess;
}
