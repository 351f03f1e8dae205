/*
 * test_word_runs.c - the text of failure messages (src/core/word_runs.c):
 * bounded appends that say when they were cut, and counters written as runs
 * of equal values, as the CUDA watchdog reports flag words at a stop.
 * Run: ./test_word_runs
 */
#include "internal.h"
#include "test.h"

static void test_runs_of_equal_values(void) {
  const uint32_t w[] = {204, 204, 204, 204, 205, 205, 7, 0, 0};
  char out[128] = "flags ";
  tpla_append_word_runs(out, sizeof out, w, 9);
  ASSERT_TRUE(strcmp(out, "flags 0-3: 204, 4-5: 205, 6: 7, 7-8: 0") == 0);
}

static void test_single_and_no_words(void) {
  const uint32_t w[] = {4000000000u};
  char out[32] = "";
  tpla_append_word_runs(out, sizeof out, w, 1);
  ASSERT_TRUE(strcmp(out, "0: 4000000000") == 0);
  out[0] = '\0';
  tpla_append_word_runs(out, sizeof out, w, 0);
  ASSERT_TRUE(strcmp(out, "") == 0);
}

static void test_appends_are_bounded_and_say_cut(void) {
  char out[16] = "abc";
  tpla_appendf(out, sizeof out, "%s", "defghij");
  ASSERT_TRUE(strcmp(out, "abcdefghij") == 0);
  tpla_appendf(out, sizeof out, "%d", 123456789); /* 19 characters do not fit in 15 */
  ASSERT_EQ_INT((int)strlen(out), 15);
  ASSERT_TRUE(strcmp(out, "abcdefghij12...") == 0);
  tpla_appendf(out, sizeof out, "%s", "more"); /* full: unchanged */
  ASSERT_TRUE(strcmp(out, "abcdefghij12...") == 0);
  /* many runs into a small buffer: cut, terminated, never past the end */
  uint32_t alternating[64];
  for (int i = 0; i < 64; i++)
    alternating[i] = (uint32_t)(i % 2);
  char small[24];
  memset(small, 'x', sizeof small);
  small[0] = '\0';
  tpla_append_word_runs(small, sizeof small, alternating, 64);
  ASSERT_EQ_INT((int)strlen(small), 23);
  ASSERT_CONTAINS(small, "...");
}

int main(void) {
  TEST(test_runs_of_equal_values);
  TEST(test_single_and_no_words);
  TEST(test_appends_are_bounded_and_say_cut);
  return test_summary();
}
