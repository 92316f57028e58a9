/*
 * rope.c — partial NeoX ("rotate half") rotary embedding. The angle table is computed in
 * double and rounded once, so large positions keep their precision (an f32 product
 * pos * inv_freq loses about log2(pos) bits) and the table is the same on every path.
 */
#include <math.h>

#include "kernels/kernels.h"

void kern_rope_table(float *cs, int64_t n_rot, double theta, int64_t pos)
{
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double phi = (double)pos * pow(theta, -2.0 * (double)i / (double)n_rot);
        cs[2 * i] = (float)cos(phi);
        cs[2 * i + 1] = (float)sin(phi);
    }
}

void kern_rope_apply(float *x, int64_t ld, int64_t n_rot, const float *cs, int64_t h0,
                     int64_t h1)
{
    int64_t half = n_rot / 2;
    for (int64_t h = h0; h < h1; h++) {
        float *xh = x + h * ld;
        for (int64_t i = 0; i < half; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            float a = xh[i], b = xh[i + half];
            xh[i] = a * c - b * s;
            xh[i + half] = b * c + a * s;
        }
    }
}
