/*
 * test_status.c - status names, the thread-local last-error message, and
 * the version. Run: ./test_status
 */
#include "test.h"
#include "tpla.h"

#include <pthread.h>

static const tpla_status_t all_statuses[] = {
    TPLA_SUCCESS,       TPLA_ERROR_INVALID_ARGUMENT, TPLA_ERROR_INVALID_USAGE,
    TPLA_ERROR_NOT_SUPPORTED, TPLA_ERROR_OUT_OF_MEMORY, TPLA_ERROR_CUDA,
    TPLA_ERROR_NCCL,    TPLA_ERROR_CUBLAS,           TPLA_ERROR_REMOTE,
    TPLA_ERROR_TIMEOUT, TPLA_ERROR_INTERNAL};
enum { NSTATUS = sizeof all_statuses / sizeof all_statuses[0] };

static void test_status_strings_are_distinct(void) {
  for (int i = 0; i < NSTATUS; i++) {
    const char *s = tpla_status_string(all_statuses[i]);
    ASSERT_TRUE(s != NULL);
    ASSERT_TRUE(strncmp(s, "TPLA_", 5) == 0);
    for (int j = 0; j < i; j++)
      ASSERT_TRUE(strcmp(s, tpla_status_string(all_statuses[j])) != 0);
  }
  ASSERT_TRUE(strcmp(tpla_status_string(TPLA_SUCCESS), "TPLA_SUCCESS") == 0);
  ASSERT_TRUE(strcmp(tpla_status_string(TPLA_ERROR_TIMEOUT), "TPLA_ERROR_TIMEOUT") == 0);
}

static void test_status_values_are_stable(void) {
  /* The enumeration is ABI: values only grow at the end. */
  for (int i = 0; i < NSTATUS; i++)
    ASSERT_EQ_INT(all_statuses[i], i);
}

static void test_unknown_status_has_a_name(void) {
  const char *s = tpla_status_string((tpla_status_t)12345);
  ASSERT_TRUE(s != NULL);
  ASSERT_TRUE(strlen(s) > 0);
  for (int i = 0; i < NSTATUS; i++)
    ASSERT_TRUE(strcmp(s, tpla_status_string(all_statuses[i])) != 0);
  ASSERT_TRUE(tpla_status_string((tpla_status_t)-1) != NULL);
}

static void test_last_error_names_function_and_argument(void) {
  tpla_host_group_t group = NULL;
  ASSERT_STATUS(tpla_host_group_create(&group, 0, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_host_group_create");
  ASSERT_CONTAINS(tpla_last_error(), "'nranks'");
  ASSERT_CONTAINS(tpla_last_error(), "0");
  ASSERT_TRUE(group == NULL);
}

static void test_last_error_cleared_on_success(void) {
  ASSERT_STATUS(tpla_barrier(NULL, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_TRUE(strlen(tpla_last_error()) > 0);
  tpla_host_group_t group = NULL;
  ASSERT_OK(tpla_host_group_create(&group, 1, NULL));
  ASSERT_TRUE(strcmp(tpla_last_error(), "") == 0);
  ASSERT_STATUS(tpla_ctx_create_host(NULL, group, 0, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "'ctx'");
  ASSERT_OK(tpla_host_group_destroy(group));
  ASSERT_TRUE(strcmp(tpla_last_error(), "") == 0);
  /* destroy(NULL) is a success and clears too */
  ASSERT_STATUS(tpla_barrier(NULL, NULL), TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_OK(tpla_ctx_destroy(NULL));
  ASSERT_TRUE(strcmp(tpla_last_error(), "") == 0);
}

typedef struct {
  int phase;              /* 0: wait for main's error, 1: go, 2: done */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char seen_before[256];  /* the thread's last error before its own failure */
  char seen_after[256];
} error_thread_t;

static void *error_thread(void *p) {
  error_thread_t *t = p;
  pthread_mutex_lock(&t->mu);
  while (t->phase == 0)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  snprintf(t->seen_before, sizeof t->seen_before, "%s", tpla_last_error());
  tpla_broadcast(NULL, NULL, 0, TPLA_FLOAT32, 0, NULL); /* fails: ctx NULL */
  snprintf(t->seen_after, sizeof t->seen_after, "%s", tpla_last_error());
  return NULL;
}

static void test_last_error_is_thread_local(void) {
  error_thread_t t = {.phase = 0};
  pthread_mutex_init(&t.mu, NULL);
  pthread_cond_init(&t.cv, NULL);
  pthread_t id;
  ASSERT_EQ_INT(pthread_create(&id, NULL, error_thread, &t), 0);
  /* Fail on this thread first, then let the other thread look. */
  ASSERT_STATUS(tpla_allreduce(NULL, NULL, NULL, 0, TPLA_FLOAT32, NULL),
                TPLA_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&t.mu);
  t.phase = 1;
  pthread_cond_signal(&t.cv);
  pthread_mutex_unlock(&t.mu);
  pthread_join(id, NULL);
  pthread_mutex_destroy(&t.mu);
  pthread_cond_destroy(&t.cv);
  ASSERT_TRUE(strcmp(t.seen_before, "") == 0);          /* main's error is not visible */
  ASSERT_CONTAINS(t.seen_after, "tpla_broadcast");       /* its own error is */
  ASSERT_CONTAINS(tpla_last_error(), "tpla_allreduce"); /* main's is unchanged */
}

static void test_version(void) {
  ASSERT_EQ_INT(tpla_version(), TPLA_VERSION);
  ASSERT_EQ_INT(TPLA_VERSION,
                TPLA_VERSION_MAJOR * 10000 + TPLA_VERSION_MINOR * 100 + TPLA_VERSION_PATCH);
  ASSERT_TRUE(tpla_version() > 0);
  tpla_features_t f = TPLA_FEATURES_INIT;
  ASSERT_OK(tpla_get_features(&f, -1));
  ASSERT_EQ_INT(f.version, tpla_version());
}

int main(void) {
  TEST(test_status_strings_are_distinct);
  TEST(test_status_values_are_stable);
  TEST(test_unknown_status_has_a_name);
  TEST(test_last_error_names_function_and_argument);
  TEST(test_last_error_cleared_on_success);
  TEST(test_last_error_is_thread_local);
  TEST(test_version);
  return test_summary();
}
