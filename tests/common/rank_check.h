/*
 * rank_check.h - checks inside a rank's body (a thread or a forked process
 * acting as one rank): on failure print the rank, place and condition, and
 * return 1 from the body so the runner counts that rank as failed. The body
 * must have an int `rank` in scope.
 */
#ifndef TPLA_TEST_RANK_CHECK_H
#define TPLA_TEST_RANK_CHECK_H

#include <stdio.h>

#include "tpla.h"

#define RCHECK(cond, ...)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "  rank %d: %s:%d: %s failed: ", rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

#define RCHECK_STATUS(expr, want)                                                        \
  do {                                                                                   \
    tpla_status_t got_ = (expr);                                                         \
    RCHECK(got_ == (want), "got %s (%s)", tpla_status_string(got_), tpla_last_error()); \
  } while (0)

#define RCHECK_OK(expr) RCHECK_STATUS(expr, TPLA_SUCCESS)

#endif
