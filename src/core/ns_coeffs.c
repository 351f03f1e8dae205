/*
 * ns_coeffs.c - Newton-Schulz coefficient sets: the presets, the effective
 * (a, b, c) table a plan applies, and the hash the ranks compare at plan
 * creation. Each triple maps a singular value x to a x + b x^3 + c x^5.
 */
#include "ns.h"

#include <math.h>
#include <string.h>

typedef struct {
  int ntriples;
  const double (*abc)[3]; /* as published: rounded to fp32 once, after any deflation */
  float safety;            /* default safety factor of the preset */
  bool deflate;            /* divide a, b, c of all but the last triple by s, s^3, s^5 */
} preset_t;

/* Keller Jordan's Muon quintic: fast initial growth, does not converge to 1
 * (singular values end in about [0.7, 1.2]). */
static const double muon_abc[][3] = {{3.4445, -4.7750, 2.0315}};

/* The 5-step quintic schedule of DESIGN.md. */
static const double muon5_abc[][3] = {{4.0848, -6.8946, 2.9270},
                                      {3.9505, -6.3029, 2.6377},
                                      {3.7418, -5.5913, 2.3037},
                                      {2.8769, -3.1427, 1.2046},
                                      {2.8366, -3.0525, 1.2012}};

/* Polar Express, degree 5: N. Amsel, D. Persson, C. Musco, R. M. Gower, "The
 * Polar Express: Optimal Matrix Sign Methods and Their Application to the
 * Muon Algorithm", arXiv:2505.16932 (2025), Algorithm 1 (coefficient list
 * for degree 5, l = 1e-3). The paper applies a safety factor of 1.01: the
 * input is divided by 1.01 ||X||_F and every triple but the last by
 * (1.01, 1.01^3, 1.01^5); the last triple repeats for further steps. */
static const double polar_express_abc[][3] = {
    {8.28721201814563, -23.595886519098837, 17.300387312530933},
    {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
    {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
    {3.3184196573706015, -2.488488024314874, 0.51004894012372},
    {2.300652019954817, -1.6689039845747493, 0.4188073119525673},
    {1.891301407787398, -1.2679958271945868, 0.37680408948524835},
    {1.8750014808534479, -1.2500016453999487, 0.3750001645474248},
    {1.875, -1.25, 0.375}};

/* Classic cubic Newton-Schulz: converges to the polar factor for singular
 * values in (0, sqrt(3)). */
static const double cubic_abc[][3] = {{1.5, -0.5, 0.0}};

static preset_t preset_of(tpla_ns_preset_t p) {
  switch (p) {
  case TPLA_NS_MUON: return (preset_t){1, muon_abc, 1.0f, false};
  case TPLA_NS_MUON_SCHEDULE5: return (preset_t){5, muon5_abc, 1.0f, false};
  case TPLA_NS_POLAR_EXPRESS: return (preset_t){8, polar_express_abc, 1.01f, true};
  case TPLA_NS_CUBIC: return (preset_t){1, cubic_abc, 1.0f, false};
  case TPLA_NS_USER: break;
  }
  return (preset_t){0, NULL, 1.0f, false};
}

float ns_effective_safety(const tpla_ns_desc_t *desc) {
  if (desc->safety > 0.0f)
    return desc->safety;
  return preset_of(desc->preset).safety;
}

void ns_fill_coefficients(const tpla_ns_desc_t *desc, float *table) {
  if (desc->preset == TPLA_NS_USER) {
    memcpy(table, desc->coefficients, sizeof(float) * 3 * (size_t)desc->steps);
    return;
  }
  preset_t p = preset_of(desc->preset);
  double s = ns_effective_safety(desc);
  for (int k = 0; k < desc->steps; k++) {
    int j = k < p.ntriples ? k : p.ntriples - 1;
    double a = p.abc[j][0], b = p.abc[j][1], c = p.abc[j][2];
    if (p.deflate && j < p.ntriples - 1) {
      a /= s;
      b /= s * s * s;
      c /= s * s * s * s * s;
    }
    table[3 * k] = (float)a;
    table[3 * k + 1] = (float)b;
    table[3 * k + 2] = (float)c;
  }
}

bool ns_steep_for_half_gram(const float *table, int steps) {
  for (int k = 0; k < steps; k++)
    if (fabsf(table[3 * k]) + fabsf(table[3 * k + 1]) + fabsf(table[3 * k + 2]) > 16.0f)
      return true;
  return false;
}

/* |p(x)| for p = a x + b x^3 + c x^5 */
static double step_at(const float *abc, double x) {
  double x2 = x * x;
  return fabs(x * (abc[0] + x2 * (abc[1] + x2 * (double)abc[2])));
}

double ns_step_sup(const float *abc, double bound) {
  /* the ends, and where p' = a + 3b u + 5c u^2 = 0 (u = x^2) inside */
  double a = abc[0], b = abc[1], c = abc[2], best = step_at(abc, bound);
  double u[2] = {-1.0, -1.0};
  if (c != 0.0) {
    double disc = 9.0 * b * b - 20.0 * a * c;
    if (disc >= 0.0) {
      u[0] = (-3.0 * b + sqrt(disc)) / (10.0 * c);
      u[1] = (-3.0 * b - sqrt(disc)) / (10.0 * c);
    }
  } else if (b != 0.0) {
    u[0] = -a / (3.0 * b);
  }
  for (int i = 0; i < 2; i++)
    if (u[i] > 0.0 && u[i] < bound * bound)
      best = fmax(best, step_at(abc, sqrt(u[i])));
  return best;
}

double ns_quad_sup(double b, double c, double bound) {
  double best = fabs(bound * (b + c * bound));
  double v = c != 0.0 ? -b / (2.0 * c) : -1.0; /* the vertex */
  if (v > 0.0 && v < bound)
    best = fmax(best, fabs(v * (b + c * v)));
  return best;
}

float ns_half_scale(double bound) {
  if (!(bound <= 0x1p8))
    return 0.0f;
  int e = 12 - (bound > 0.0 ? (int)ceil(log2(bound)) : -40);
  e = e < -40 ? -40 : e > 40 ? 40 : e;
  return ldexpf(1.0f, e);
}

uint64_t ns_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

const char *ns_algorithm_name(tpla_ns_algorithm_t a) {
  switch (a) {
  case TPLA_NS_ALGO_AUTO: return "AUTO";
  case TPLA_NS_ALGO_GRAM_ALLREDUCE: return "GRAM_ALLREDUCE";
  case TPLA_NS_ALGO_REDISTRIBUTE: return "REDISTRIBUTE";
  case TPLA_NS_ALGO_GATHER: return "GATHER";
  case TPLA_NS_ALGO_LOCAL: return "LOCAL";
  case TPLA_NS_ALGO_GRAM_SHARDED: return "GRAM_SHARDED";
  }
  return "?";
}

const char *ns_iteration_name(tpla_ns_iteration_t it) {
  switch (it) {
  case TPLA_NS_ITERATE_AUTO: return "AUTO";
  case TPLA_NS_ITERATE_X: return "X";
  case TPLA_NS_ITERATE_GRAM: return "GRAM";
  }
  return "?";
}
