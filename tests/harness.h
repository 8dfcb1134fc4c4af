/*
 * A minimal test harness shared by the C tests.
 *
 *   static void testSomething(void) { CHECK(x == 1); CHECK_RES(call(), mscclppSuccess); }
 *   int main(void) { RUN(testSomething); return harnessFinish(); }
 *
 * CHECK records a failure with file:line and goes on; RUN counts a test as
 * passed when it records no failure. harnessFinish() prints "N passed,
 * N failed" and returns the exit status. harnessSkip() exits 77, which CTest
 * shows as skipped, never as passed.
 */
#ifndef MSCCLPP_TESTS_HARNESS_H_
#define MSCCLPP_TESTS_HARNESS_H_

#include <stdio.h>
#include <stdlib.h>

#include "mscclpp/core.h"

static int harnessFailures_ = 0;
static int harnessPassed_ = 0;
static int harnessFailed_ = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      harnessFailures_++;                                                    \
    }                                                                        \
  } while (0)

#define CHECK_RES(expr, expected)                                                                     \
  do {                                                                                                \
    mscclppResult_t got_ = (expr);                                                                    \
    if (got_ != (expected)) {                                                                         \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d; last error: %s\n", __FILE__, __LINE__, \
              #expr, (int)got_, mscclppGetErrorString(got_), (int)(expected), mscclppGetLastError()); \
      harnessFailures_++;                                                                             \
    }                                                                                                 \
  } while (0)

#define RUN(fn)                                                           \
  do {                                                                    \
    int before_ = harnessFailures_;                                       \
    fn();                                                                 \
    if (harnessFailures_ == before_) {                                    \
      harnessPassed_++;                                                   \
      printf("PASS %s\n", #fn);                                           \
    } else {                                                              \
      harnessFailed_++;                                                   \
      printf("FAIL %s\n", #fn);                                           \
    }                                                                     \
    fflush(stdout);                                                       \
  } while (0)

/* Nonzero when a test failed, or a CHECK failed outside RUN (workers that
 * check in main: their failures used to leave the exit status 0). */
static inline int harnessFinish(void) {
  printf("%d passed, %d failed\n", harnessPassed_, harnessFailed_);
  if (harnessFailed_ == 0 && harnessFailures_ != 0)
    printf("FAIL: %d checks failed outside the tests\n", harnessFailures_);
  return harnessFailed_ == 0 && harnessFailures_ == 0 ? 0 : 1;
}

static inline void harnessSkip(const char* why) {
  printf("SKIPPED: %s\n", why);
  fflush(stdout);
  exit(77);
}

#endif /* MSCCLPP_TESTS_HARNESS_H_ */
