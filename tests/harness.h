/* SPDX-License-Identifier: MIT */
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
 *
 * Skipping one case: a test that cannot run here calls SKIP_CASE("needs a
 * GPU"), which marks it skipped and returns from it; RUN prints "SKIP name:
 * why" and counts it apart. harnessFinish() then exits 77 (skipped) unless a
 * case failed, so a binary whose cases may skip gets its own CTest entry for
 * them (select them with harnessInit's --only / --except): the summary then
 * counts them as skipped, and the entry of the other cases still passes.
 *
 *   int main(int argc, char** argv) { harnessInit(argc, argv); RUN(...); return harnessFinish(); }
 *   test_x --only testA,testB      run only these cases
 *   test_x --except testC          run every case but these
 * Other arguments are left to the test.
 */
#ifndef MSCCLPP_TESTS_HARNESS_H_
#define MSCCLPP_TESTS_HARNESS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/core.h"

static int harnessFailures_ = 0;
static int harnessPassed_ = 0;
static int harnessFailed_ = 0;
static int harnessSkipped_ = 0;
static const char* harnessCaseSkipped_ __attribute__((unused)) = NULL; /* why the running case skipped itself */
static const char* harnessOnly_ = NULL;        /* comma-separated case names, or NULL */
static const char* harnessExcept_ = NULL;

/* Reads --only LIST and --except LIST (comma-separated case names). */
static inline void harnessInit(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--only") == 0) harnessOnly_ = argv[++i];
    else if (strcmp(argv[i], "--except") == 0) harnessExcept_ = argv[++i];
  }
}

/* Whether `name` is one of the comma-separated names in `list`. */
static inline int harnessListHas_(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* p = list; p && *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

static inline int harnessSelected_(const char* name) {
  if (harnessOnly_ && !harnessListHas_(harnessOnly_, name)) return 0;
  return !(harnessExcept_ && harnessListHas_(harnessExcept_, name));
}

/* Marks the running case as skipped (for `why`) and returns from it. */
#define SKIP_CASE(why)           \
  do {                           \
    harnessCaseSkipped_ = (why); \
    return;                      \
  } while (0)

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
    if (!harnessSelected_(#fn)) break;                                    \
    int before_ = harnessFailures_;                                       \
    harnessCaseSkipped_ = NULL;                                           \
    fn();                                                                 \
    if (harnessFailures_ != before_) {                                    \
      harnessFailed_++;                                                   \
      printf("FAIL %s\n", #fn);                                           \
    } else if (harnessCaseSkipped_) {                                     \
      harnessSkipped_++;                                                  \
      printf("SKIP %s: %s\n", #fn, harnessCaseSkipped_);                  \
    } else {                                                              \
      harnessPassed_++;                                                   \
      printf("PASS %s\n", #fn);                                           \
    }                                                                     \
    fflush(stdout);                                                       \
  } while (0)

/* 1 when a test failed, or a CHECK failed outside RUN (workers that check
 * in main: their failures used to leave the exit status 0); else 77 when a
 * case skipped itself; else 0. */
static inline int harnessFinish(void) {
  if (harnessSkipped_)
    printf("%d passed, %d failed, %d skipped\n", harnessPassed_, harnessFailed_, harnessSkipped_);
  else
    printf("%d passed, %d failed\n", harnessPassed_, harnessFailed_);
  if (harnessFailed_ == 0 && harnessFailures_ != 0)
    printf("FAIL: %d checks failed outside the tests\n", harnessFailures_);
  if (harnessFailed_ != 0 || harnessFailures_ != 0) return 1;
  return harnessSkipped_ ? 77 : 0;
}

static inline void harnessSkip(const char* why) {
  printf("SKIPPED: %s\n", why);
  fflush(stdout);
  exit(77);
}

#endif /* MSCCLPP_TESTS_HARNESS_H_ */
