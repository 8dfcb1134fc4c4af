/* SPDX-License-Identifier: MIT */
/*
 * A build without jansson (-DMSCCLPP_ENABLE_JANSSON=OFF): the plan API is
 * there, and loading a plan fails with mscclppInvalidUsage saying that the
 * build has no JSON parser.
 */
#include <string.h>

#include "harness.h"
#include "mscclpp/plan.h"

static void testRefused(void) {
  mscclppPlan_t plan = NULL;
  CHECK_RES(mscclppPlanLoadString("{}", 2, &plan), mscclppInvalidUsage);
  CHECK(strstr(mscclppGetLastError(), "this build of mscclpp has no JSON parser") != NULL);
  CHECK_RES(mscclppPlanLoadFile("/nonexistent.json", &plan), mscclppInvalidArgument); /* unreadable first */
  CHECK(plan == NULL);
}

int main(int argc, char** argv) {
  harnessInit(argc, argv);
  RUN(testRefused);
  return harnessFinish();
}
