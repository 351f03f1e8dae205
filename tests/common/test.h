/*
 * test.h - the test harness: ASSERT_* macros that print both operands, one
 * function per test, skips reported apart from passes.
 *
 *   static void test_something(void) { ASSERT_EQ_INT(1 + 1, 2); }
 *   int main(void) { TEST(test_something); return test_summary(); }
 *
 * A test fails at its first failed assertion (the function returns). Call
 * SKIP("why") to skip. test_summary() prints "N passed, N failed, N skipped"
 * and returns 0 if nothing failed, 77 (CTest's skip code) if everything was
 * skipped, 1 otherwise.
 */
#ifndef TPLA_TEST_H
#define TPLA_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { TEST_RUNNING, TEST_FAILED, TEST_SKIPPED };
static int test_state_ __attribute__((unused));
static int test_passed_ __attribute__((unused)), test_failed_ __attribute__((unused)),
    test_skipped_ __attribute__((unused));

#define TEST_FAIL_(...)                                      \
  do {                                                       \
    fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);        \
    fprintf(stderr, __VA_ARGS__);                            \
    fprintf(stderr, "\n");                                   \
    test_state_ = TEST_FAILED;                               \
  } while (0)

/* Assertions return from the test function on failure. */
#define ASSERT_TRUE(c)                                   \
  do {                                                   \
    if (!(c)) {                                          \
      TEST_FAIL_("ASSERT_TRUE(%s) failed", #c);          \
      return;                                            \
    }                                                    \
  } while (0)

#define ASSERT_EQ_INT(a, b)                                                              \
  do {                                                                                   \
    long long a_ = (long long)(a), b_ = (long long)(b);                                  \
    if (a_ != b_) {                                                                      \
      TEST_FAIL_("ASSERT_EQ_INT(%s, %s) failed: %lld != %lld", #a, #b, a_, b_);          \
      return;                                                                            \
    }                                                                                    \
  } while (0)

#define ASSERT_STATUS(expr, want)                                                        \
  do {                                                                                   \
    tpla_status_t got_ = (expr), want_ = (want);                                         \
    if (got_ != want_) {                                                                 \
      TEST_FAIL_("%s returned %s, expected %s (last error: %s)", #expr,                  \
                 tpla_status_string(got_), tpla_status_string(want_), tpla_last_error()); \
      return;                                                                            \
    }                                                                                    \
  } while (0)

#define ASSERT_OK(expr) ASSERT_STATUS(expr, TPLA_SUCCESS)

/* |a - b| <= tol */
#define ASSERT_NEAR(a, b, tol)                                                              \
  do {                                                                                      \
    double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);                          \
    if (!(fabs(a_ - b_) <= t_)) {                                                           \
      TEST_FAIL_("ASSERT_NEAR(%s, %s, %s) failed: %.9g vs %.9g (diff %.3g)", #a, #b, #tol,  \
                 a_, b_, fabs(a_ - b_));                                                    \
      return;                                                                               \
    }                                                                                       \
  } while (0)

/* a <= b, e.g. an error against its tolerance */
#define ASSERT_LE(a, b)                                                                  \
  do {                                                                                   \
    double a_ = (double)(a), b_ = (double)(b);                                           \
    if (!(a_ <= b_)) {                                                                   \
      TEST_FAIL_("ASSERT_LE(%s, %s) failed: %.9g > %.9g", #a, #b, a_, b_);               \
      return;                                                                            \
    }                                                                                    \
  } while (0)

/* The message contains `needle`. */
#define ASSERT_CONTAINS(haystack, needle)                                                \
  do {                                                                                   \
    const char *h_ = (haystack), *n_ = (needle);                                         \
    if (h_ == NULL || strstr(h_, n_) == NULL) {                                          \
      TEST_FAIL_("ASSERT_CONTAINS(%s, \"%s\") failed: got \"%s\"", #haystack, n_,        \
                 h_ ? h_ : "(null)");                                                    \
      return;                                                                            \
    }                                                                                    \
  } while (0)

#define SKIP(...)                                  \
  do {                                             \
    fprintf(stderr, "  skip: ");                   \
    fprintf(stderr, __VA_ARGS__);                  \
    fprintf(stderr, "\n");                         \
    test_state_ = TEST_SKIPPED;                    \
    return;                                        \
  } while (0)

#define TEST(fn)                                                        \
  do {                                                                  \
    test_state_ = TEST_RUNNING;                                         \
    fn();                                                               \
    if (test_state_ == TEST_FAILED) {                                   \
      test_failed_++;                                                   \
      printf("FAIL %s\n", #fn);                                         \
    } else if (test_state_ == TEST_SKIPPED) {                           \
      test_skipped_++;                                                  \
      printf("skip %s\n", #fn);                                         \
    } else {                                                            \
      test_passed_++;                                                   \
      printf("ok   %s\n", #fn);                                         \
    }                                                                   \
    fflush(stdout);                                                     \
  } while (0)

static inline int test_summary(void) {
  printf("%d passed, %d failed, %d skipped\n", test_passed_, test_failed_, test_skipped_);
  if (test_failed_)
    return 1;
  if (test_passed_ == 0 && test_skipped_ > 0)
    return 77;
  return 0;
}

/* main() of a GPU test in a build without the CUDA executor: its one test
 * is skipped, so CTest reports the test as skipped rather than passed. */
#define TEST_MAIN_WITHOUT_CUDA()                                                           \
  static void test_requires_cuda_build(void) { SKIP("built without the CUDA executor"); } \
  int main(void) {                                                                         \
    TEST(test_requires_cuda_build);                                                        \
    return test_summary();                                                                 \
  }

#endif /* TPLA_TEST_H */
