/*
 * data.c - random inputs and the float64 GEMM reference of the `tpla` tool.
 *
 * Inputs are uniform in [-1, 1) and rounded to their dtype on the host, so the
 * reference sees exactly the values the executor multiplies; the remaining
 * differences are the executor's fp32 accumulation and the rounding of D,
 * which tool_check_gemm bounds element by element.
 */
#include "tool.h"

#include "internal.h" /* tpla_load_elem / tpla_store_elem (linked statically) */

#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHECK_ALL_LIMIT 512 /* check every row (column) up to this many */
#define CHECK_SAMPLE 256    /* else this many sampled rows (columns) */

/* ---- random numbers (splitmix64) ---------------------------------------------------- */

void tool_rng_seed(tool_rng_t *rng, uint64_t seed) { rng->state = seed; }

static uint64_t rng_next(tool_rng_t *rng) {
  uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double tool_rng_uniform(tool_rng_t *rng) {
  double v;
  do
    v = (double)(rng_next(rng) >> 11) * 0x1.0p-52 - 1.0;
  while (v == 0.0);
  return v;
}

uint64_t tool_fresh_seed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tool_rng_t rng = {(uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
                    ((uint64_t)getpid() << 32)};
  uint64_t seed = rng_next(&rng) & 0xffffffffffull; /* short enough to retype for -s */
  return seed ? seed : 1;
}

void tool_fill_random(tpla_matrix_t m, tool_rng_t *rng) {
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++)
      tpla_store_elem(m.data, m.dtype, (size_t)(i * m.ld + j), tool_rng_uniform(rng));
}

/* ---- the float64 reference ------------------------------------------------------- */

static double unit_roundoff(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT16: return 0x1.0p-11;
  case TPLA_BFLOAT16: return 0x1.0p-8;
  case TPLA_FLOAT64: return 0x1.0p-53;
  default: return 0x1.0p-24;
  }
}

/* Indices of the rows (or columns) to check: all of them, or one random
 * index in each of CHECK_SAMPLE equal strata, the first and last included.
 * Returns how many were stored in idx (room for CHECK_ALL_LIMIT). */
static int64_t pick_indices(int64_t *idx, int64_t count, tool_rng_t *rng) {
  if (count <= CHECK_ALL_LIMIT) {
    for (int64_t i = 0; i < count; i++)
      idx[i] = i;
    return count;
  }
  for (int64_t s = 0; s < CHECK_SAMPLE; s++) {
    int64_t lo = s * count / CHECK_SAMPLE, hi = (s + 1) * count / CHECK_SAMPLE;
    idx[s] = lo + (int64_t)(rng_next(rng) % (uint64_t)(hi - lo));
  }
  idx[0] = 0;
  idx[CHECK_SAMPLE - 1] = count - 1;
  return CHECK_SAMPLE;
}

/* Element (i, j) of op(x) as a double. */
static double op_elem(tpla_matrix_t x, tpla_op_t op, int64_t i, int64_t j) {
  int64_t r = op == TPLA_OP_N ? i : j, c = op == TPLA_OP_N ? j : i;
  return tpla_load_elem(x.data, x.dtype, (size_t)(r * x.ld + c));
}

void tool_check_gemm(tool_check_t *out, tpla_matrix_t d_out, tpla_matrix_t d_in, tpla_matrix_t a,
                     tpla_op_t op_a, tpla_matrix_t b, tpla_op_t op_b, float alpha, float beta,
                     int allow_tf32, tool_rng_t *rng) {
  int64_t m = d_out.rows, n = d_out.cols;
  int64_t k = op_a == TPLA_OP_N ? a.cols : a.rows;
  out->checked = out->wrong = 0;
  out->max_rel = 0;
  int64_t rows[CHECK_ALL_LIMIT], cols[CHECK_ALL_LIMIT];
  int64_t nr = pick_indices(rows, m, rng), nc = pick_indices(cols, n, rng);
  size_t kk = k > 0 ? (size_t)k : 1;
  double *arow = malloc((size_t)nr * kk * sizeof(double));  /* sampled rows of op(A) */
  double *bcol = malloc((size_t)nc * kk * sizeof(double));  /* sampled columns of op(B) */
  double *ref = malloc((size_t)(nr * nc + 1) * sizeof(double));
  double *bound = malloc((size_t)(nr * nc + 1) * sizeof(double));
  if (!arow || !bcol || !ref || !bound) {
    fprintf(stderr, "# check: out of host memory; counting every element as wrong\n");
    out->checked = out->wrong = nr * nc;
    out->max_rel = INFINITY;
    goto done;
  }
  for (int64_t r = 0; r < nr; r++)
    for (int64_t l = 0; l < k; l++)
      arow[r * k + l] = op_elem(a, op_a, rows[r], l);
  for (int64_t c = 0; c < nc; c++)
    for (int64_t l = 0; l < k; l++)
      bcol[c * k + l] = op_elem(b, op_b, l, cols[c]);

  /* Error model (see tool.h): with random inputs the fp32 rounding errors of
   * a k-term sum add up like a random walk, about u32 sqrt(k) ||a b||_2 / 2.5
   * for sequential summation (less for blocked or pairwise), and TF32
   * rounds each input once, about u_tf32 ||a b||_2. The bound allows 8 times
   * both, so a correct result passes by a wide margin while a dropped term,
   * a wrong element or a wrong transpose does not. */
  const double u32 = 0x1.0p-24;
  double u_in = allow_tf32 && a.dtype == TPLA_FLOAT32 ? 0x1.0p-11 : 0.0;
  double u_d = unit_roundoff(d_out.dtype);
  double sumsq = 0;
  for (int64_t r = 0; r < nr; r++)
    for (int64_t c = 0; c < nc; c++) {
      const double *x = arow + r * k, *y = bcol + c * k;
      double dot = 0, norm2 = 0;
      for (int64_t l = 0; l < k; l++) {
        double p = x[l] * y[l];
        dot += p;
        norm2 += p * p;
      }
      double cin = beta != 0.0f
                       ? tpla_load_elem(d_in.data, d_in.dtype,
                                        (size_t)(rows[r] * d_in.ld + cols[c]))
                       : 0.0;
      double v = (double)alpha * dot + (double)beta * cin;
      double products = fabs((double)alpha) * sqrt(norm2); /* ||alpha a b||_2 */
      double epilogue = fabs((double)alpha * dot) + fabs((double)beta * cin);
      ref[r * nc + c] = v;
      bound[r * nc + c] = 2 * u_d * fabs(v) +
                          8 * (u_in + u32 * sqrt((double)k)) * products +
                          4 * u32 * epilogue + 1e-300;
      sumsq += v * v;
    }
  double rms = sqrt(sumsq / (double)(nr * nc > 0 ? nr * nc : 1));
  for (int64_t r = 0; r < nr; r++)
    for (int64_t c = 0; c < nc; c++) {
      double got = tpla_load_elem(d_out.data, d_out.dtype,
                                  (size_t)(rows[r] * d_out.ld + cols[c]));
      double v = ref[r * nc + c], err = fabs(got - v);
      if (!(err <= bound[r * nc + c])) /* NaN counts as wrong */
        out->wrong++;
      double rel = err / (fabs(v) + rms + 1e-300);
      if (isnan(rel) || rel > out->max_rel) /* a NaN, once in, stays */
        out->max_rel = rel;
      out->checked++;
    }
done:
  free(arow);
  free(bcol);
  free(ref);
  free(bound);
}
