/*
 * word_runs.c - text for failure messages: appending to a bounded buffer,
 * and an array of counters written as runs of equal values ("0-3: 204,
 * 4-7: 205"), how the CUDA watchdog reports a transport's flag words at a
 * stop (src/cuda/watchdog.c).
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tpla_appendf(char *out, size_t size, const char *fmt, ...) {
  size_t len = strnlen(out, size);
  if (size < 4 || len + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + len, size - len, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= size - len) /* cut: say so */
    memcpy(out + size - 4, "...", 4);
}

void tpla_append_word_runs(char *out, size_t size, const uint32_t *words, int n) {
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && words[j + 1] == words[i])
      j++;
    const char *sep = i > 0 ? ", " : "";
    if (j > i)
      tpla_appendf(out, size, "%s%d-%d: %u", sep, i, j, (unsigned)words[i]);
    else
      tpla_appendf(out, size, "%s%d: %u", sep, i, (unsigned)words[i]);
    i = j + 1;
  }
}
