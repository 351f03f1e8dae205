/*
 * ns_presets_ref.h - the Newton-Schulz coefficient sets typed in again from
 * their sources, for the CPU and the GPU tests, so that the library's tables
 * (src/core/ns_coeffs.c) are checked rather than reused; the table of
 * triples a plan is documented to apply; and the scalar map of one step.
 */
#ifndef TPLA_NS_PRESETS_REF_H
#define TPLA_NS_PRESETS_REF_H

#include "tpla.h"

#include <stdbool.h>

/* Muon (K. Jordan): one triple, every step. */
static const double ref_muon[][3] = {{3.4445, -4.7750, 2.0315}};
/* The 5-step quintic schedule of DESIGN.md. */
static const double ref_muon5[][3] = {{4.0848, -6.8946, 2.9270}, {3.9505, -6.3029, 2.6377},
                                      {3.7418, -5.5913, 2.3037}, {2.8769, -3.1427, 1.2046},
                                      {2.8366, -3.0525, 1.2012}};
/* Polar Express, degree 5: Amsel, Persson, Musco, Gower, arXiv:2505.16932,
 * Algorithm 1; all but the last triple are deflated by the safety factor
 * 1.01 (a / s, b / s^3, c / s^5); the last triple repeats. */
static const double ref_polar_express[][3] = {
    {8.28721201814563, -23.595886519098837, 17.300387312530933},
    {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
    {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
    {3.3184196573706015, -2.488488024314874, 0.51004894012372},
    {2.300652019954817, -1.6689039845747493, 0.4188073119525673},
    {1.891301407787398, -1.2679958271945868, 0.37680408948524835},
    {1.8750014808534479, -1.2500016453999487, 0.3750001645474248},
    {1.875, -1.25, 0.375}};
/* Classic cubic Newton-Schulz. */
static const double ref_cubic[][3] = {{1.5, -0.5, 0.0}};

/* One step of the scalar map on a singular value: a x + b x^3 + c x^5. */
static inline double ref_poly(const float *abc, double x) {
  double x2 = x * x;
  return x * (abc[0] + x2 * (abc[1] + x2 * (double)abc[2]));
}

/* Fill table[3*steps] with the triples a plan applies (stored as floats, as
 * the library stores them; the last triple repeats) and return the safety
 * factor (as the float the library keeps). */
static inline double ref_preset_table(tpla_ns_preset_t p, int steps, float *table) {
  const double(*t)[3] = ref_muon;
  int n = 1;
  double safety = 1.0;
  bool deflate = false;
  switch (p) {
  case TPLA_NS_MUON: break;
  case TPLA_NS_MUON_SCHEDULE5: t = ref_muon5, n = 5; break;
  case TPLA_NS_POLAR_EXPRESS: t = ref_polar_express, n = 8, safety = 1.01, deflate = true; break;
  case TPLA_NS_CUBIC: t = ref_cubic; break;
  default: break;
  }
  double s = (float)safety;
  for (int k = 0; k < steps; k++) {
    int j = k < n ? k : n - 1;
    double d = deflate && j < n - 1 ? s : 1.0;
    table[3 * k] = (float)(t[j][0] / d);
    table[3 * k + 1] = (float)(t[j][1] / (d * d * d));
    table[3 * k + 2] = (float)(t[j][2] / (d * d * d * d * d));
  }
  return s;
}

#endif
