/*
 * ffn_avx2.c — AVX2 (+FMA) variants of the elementwise kernels of ffn.c: SwiGLU, the attention
 * output gate (sigmoid_mul) and the GDN gated-norm tail (gated_scale). Bit-identical to ffn.c;
 * selected through kern_ops_for("avx2") (dispatch.c).
 *
 * Design note:
 *   1. kern_expf, silu and sigmoid run lane-wise as vec_avx2_int.h states (its invariants 1, 2):
 *      the scalar expressions, with IEEE add, multiply and divide rounding the same in a vector
 *      lane as in scalar code.
 *   2. Leftover elements (a range not a multiple of 8) take the scalar reference.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/vec_avx2_int.h"

void kern_swiglu_avx2(float *y, const float *gate, const float *up, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    if (i < i1) kern_swiglu(y, gate, up, i, i1);
}

void kern_sigmoid_mul_avx2(float *y, const float *x, const float *g, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sigmoid8(_mm256_loadu_ps(g + i))));
    if (i < n) kern_sigmoid_mul(y + i, x + i, g + i, n - i);
}

void kern_gated_scale_avx2(float *y, const float *z, const float *w, float r, int64_t n)
{
    int64_t i = 0;
    const __m256 rv = _mm256_set1_ps(r);
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(y + i), rv), _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(a, silu8(_mm256_loadu_ps(z + i))));
    }
    if (i < n) kern_gated_scale(y + i, z + i, w + i, r, n - i);
}

#else
typedef int kern_ffn_avx2_unused; /* not x86: the variant does not exist */
#endif
