/*
 * test_deadline.c - absolute deadlines (src/core/deadline.c): the
 * nanoseconds carry into seconds exactly when they reach 10^9, so a
 * timed wait never gets an out-of-range deadline (EINVAL, not a wait).
 * Run: ./test_deadline
 */
#include "internal.h"
#include "test.h"

static void expect(struct timespec t, int64_t ms, time_t sec, long nsec) {
  struct timespec d = tpla_deadline_add(t, ms);
  ASSERT_TRUE(d.tv_sec == sec && d.tv_nsec == nsec);
}

static void test_nanoseconds_carry_at_one_second(void) {
  expect((struct timespec){5, 0}, 0, 5, 0);
  expect((struct timespec){5, 1000000}, 1500, 6, 501000000);
  expect((struct timespec){5, 999000000}, 1, 6, 0); /* exactly 10^9: carried */
  expect((struct timespec){5, 998999999}, 1, 5, 999999999);
  expect((struct timespec){5, 999999999}, 999, 6, 998999999);
  expect((struct timespec){0, 999999999}, 300000, 300, 999999999);
}

static void test_after_is_now_plus(void) {
  struct timespec before, after;
  clock_gettime(CLOCK_MONOTONIC, &before);
  struct timespec d = tpla_deadline_after(2500);
  clock_gettime(CLOCK_MONOTONIC, &after);
  double at = (double)d.tv_sec + 1e-9 * (double)d.tv_nsec;
  ASSERT_TRUE(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
  ASSERT_TRUE(at >= (double)before.tv_sec + 1e-9 * (double)before.tv_nsec + 2.5 - 1e-9);
  ASSERT_TRUE(at <= (double)after.tv_sec + 1e-9 * (double)after.tv_nsec + 2.5 + 1e-9);
}

int main(void) {
  TEST(test_nanoseconds_carry_at_one_second);
  TEST(test_after_is_now_plus);
  return test_summary();
}
