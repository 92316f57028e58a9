/*
 * dispatch.c — the table of kernel variants (scalar, AVX2, AVX2 + AVX-VNNI, AVX-512) and the
 * choice among them. The AVX2 + AVX-VNNI table is the AVX2 one with its integer matmuls
 * (Q8_0 rows and panels, Q4_K rows, the Q4_K and Q6_K row-group layouts) built again for
 * vpdpbusd / vpdpwssd (the *_avxvnni.c files).
 *
 * Design note:
 *   1. The engine detects the CPU (sys) and asks kern_best_variant for a name, then
 *      kern_ops_for(name) for the table; kernels never detect the CPU themselves (no sys
 *      include, docs/DESIGN.md §2). HEADSTART_CPU-style overrides are the engine's business.
 *   2. Every table computes the same bits (kernels.h, "SIMD variants and dispatch"); the
 *      choice changes speed only. The scalar table always exists; the x86 variants exist in
 *      x86 builds only, so a generic (e.g. arm64) build runs the scalar path.
 *   3. Calling a variant's functions on a CPU without its instructions is undefined
 *      (SIGILL): only kern_best_variant's answer, or a variant kern_variant_runs allows, is
 *      safe.
 *   4. The ranks order the tables by speed; what each row needs is data (ops_needs, row for
 *      row), not implied by its rank: "avxvnni" (rank 2) needs AVX-VNNI, which CPUs with
 *      AVX-512 VNNI need not have (Zen 4, Ice Lake, Cascade Lake have vpdpbusd only
 *      EVEX-encoded). kern_best_variant is the fastest row whose needs a CPU meets, and
 *      kern_variant_runs whether it meets a given row's.
 */
#include <string.h>

#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#define KERN_HAVE_X86 1
#else
#define KERN_HAVE_X86 0
#endif

#if KERN_HAVE_X86
/* The AVX2-level tables, which differ in their Q8_0 and Q4_K matmuls only. */
#define KERN_AVX2_TABLE(NAME, MATMUL, MATMUL_Q8P, MATMUL_K, MATMUL_KP)                                \
    {                                                                                                \
        .name = NAME, .matmul = MATMUL, .q8_quantize = kern_q8_quantize_avx2, .dot = kern_dot_avx2,    \
        .attn = kern_attn_avx2, .gdn_step = kern_gdn_step_avx2, .matmul_k = MATMUL_K,                 \
        .bf16_round = kern_bf16_round_avx2, .bf16_matmul = kern_bf16_matmul_avx2,                     \
        .swiglu = kern_swiglu_avx2, .sigmoid_mul = kern_sigmoid_mul_avx2,                             \
        .gated_scale = kern_gated_scale_avx2, .conv1d_step = kern_conv1d_step_avx2,                   \
        .attn_tokens = kern_attn_tokens_avx2, .matmul_x = kern_matmul_x_avx2,                         \
        .q8k_quantize = kern_q8k_quantize_avx2, .matmul_q8p = MATMUL_Q8P, .matmul_kp = MATMUL_KP,           \
    }
#endif

/* In rank order (kern_variant_rank), fastest last; ops_needs below says what each needs.
 * Designated initializers: a member added to struct kern_ops and forgotten here is NULL,
 * which test_simd.c's every_member_set catches, never a shifted pointer (matmul_q8p is
 * NULL by design where a table has no panel-layout kernel: written out, and tested so). */
static const struct kern_ops ops_table[] = {
    {
        .name = "scalar",
        .matmul = kern_matmul,
        .q8_quantize = kern_q8_quantize,
        .dot = kern_dot,
        .attn = kern_attn,
        .gdn_step = kern_gdn_step,
        .matmul_k = kern_matmul_k,
        .bf16_round = kern_bf16_round,
        .bf16_matmul = kern_bf16_matmul,
        .swiglu = kern_swiglu,
        .sigmoid_mul = kern_sigmoid_mul,
        .gated_scale = kern_gated_scale,
        .conv1d_step = kern_conv1d_step,
        .attn_tokens = kern_attn_tokens,
        .matmul_x = kern_matmul_x,
        .q8k_quantize = kern_q8k_quantize,
        .matmul_q8p = NULL, /* no panel layout: the engine keeps Q8_0 rows */
        .matmul_kp = NULL,  /* nor a row-group one: the K-quant rows stay */
    },
#if KERN_HAVE_X86
    /* AVX2 + FMA + F16C, and the same with AVX-VNNI: the Q8_0 and Q4_K matmuls built again
     * for vpdpbusd / vpdpwssd on ymm (matmul_avxvnni.c, q8p_avxvnni.c, q4k_avxvnni.c,
     * q4kp_avxvnni.c), everything else shared */
    KERN_AVX2_TABLE("avx2", kern_matmul_avx2, kern_matmul_q8p_avx2, kern_matmul_k_avx2, kern_matmul_kp_avx2),
    KERN_AVX2_TABLE("avxvnni", kern_matmul_avxvnni, kern_matmul_q8p_avxvnni, kern_matmul_k_avxvnni,
                    kern_matmul_kp_avxvnni),
    /* AVX-512 without AVX512_BF16: everything of "avx512" but the two bf16 entries, which
     * take the FMA forms of the same contract (bf16_avx512.c note 2, bf16_avx2.c) */
    {
        .name = "avx512vnni",
        .matmul = kern_matmul_avx512,
        .q8_quantize = kern_q8_quantize_avx512,
        .dot = kern_dot_avx512,
        .attn = kern_attn_avx512,
        .gdn_step = kern_gdn_step_avx512,
        .matmul_k = kern_matmul_k_avx512,
        .bf16_round = kern_bf16_round_avx2,
        .bf16_matmul = kern_bf16_matmul_avx512f,
        .swiglu = kern_swiglu_avx512,
        .sigmoid_mul = kern_sigmoid_mul_avx512,
        .gated_scale = kern_gated_scale_avx512,
        .conv1d_step = kern_conv1d_step_avx512,
        .attn_tokens = kern_attn_tokens_avx512,
        .matmul_x = kern_matmul_x_avx512,
        .q8k_quantize = kern_q8k_quantize_avx2,
        .matmul_q8p = kern_matmul_q8p_avx512,
        .matmul_kp = kern_matmul_kp_avx512,
    },
    {
        .name = "avx512",
        .matmul = kern_matmul_avx512,
        .q8_quantize = kern_q8_quantize_avx512,
        .dot = kern_dot_avx512,
        .attn = kern_attn_avx512,
        .gdn_step = kern_gdn_step_avx512,
        .matmul_k = kern_matmul_k_avx512,
        .bf16_round = kern_bf16_round_avx512,
        .bf16_matmul = kern_bf16_matmul_avx512,
        .swiglu = kern_swiglu_avx512,
        .sigmoid_mul = kern_sigmoid_mul_avx512,
        .gated_scale = kern_gated_scale_avx512,
        .conv1d_step = kern_conv1d_step_avx512,
        .attn_tokens = kern_attn_tokens_avx512,
        .matmul_x = kern_matmul_x_avx512,
        .q8k_quantize = kern_q8k_quantize_avx2,
        .matmul_q8p = kern_matmul_q8p_avx512,
        .matmul_kp = kern_matmul_kp_avx512,
    },
#endif
};

const struct kern_ops *kern_ops_for(const char *variant)
{
    if (!variant) return NULL;
    for (size_t i = 0; i < sizeof(ops_table) / sizeof(ops_table[0]); i++)
        if (strcmp(ops_table[i].name, variant) == 0) return &ops_table[i];
    return NULL;
}

int kern_variant_rank(const char *variant)
{
    const struct kern_ops *o = kern_ops_for(variant);
    return o ? (int)(o - ops_table) : -1;
}

/* The CPU features a table needs (note 4), one entry per row of ops_table. The AVX-512 rows
 * also use FMA and F16C-class conversions, which every AVX-512 CPU has (a CPU reporting
 * AVX-512 without AVX2 is not a real machine), so they name their AVX-512 features only. */
enum { NEED_AVX2 = 1, NEED_AVX_VNNI = 2, NEED_AVX512_VNNI = 4, NEED_AVX512_BF16 = 8 };
static const unsigned ops_needs[] = {
    0,
#if KERN_HAVE_X86
    NEED_AVX2,
    NEED_AVX2 | NEED_AVX_VNNI,
    NEED_AVX512_VNNI,
    NEED_AVX512_VNNI | NEED_AVX512_BF16,
#endif
};
_Static_assert(sizeof ops_needs / sizeof ops_needs[0] == sizeof ops_table / sizeof ops_table[0],
               "ops_needs has one entry per row of ops_table");

static unsigned cpu_has(bool avx2_fma_f16c, bool avx_vnni, bool avx512_vnni, bool avx512_bf16)
{
    return (avx2_fma_f16c ? NEED_AVX2 : 0) | (avx_vnni ? NEED_AVX_VNNI : 0) | (avx512_vnni ? NEED_AVX512_VNNI : 0) |
           (avx512_bf16 ? NEED_AVX512_BF16 : 0);
}

const char *kern_best_variant(bool avx2_fma_f16c, bool avx_vnni, bool avx512_vnni, bool avx512_bf16)
{
    unsigned have = cpu_has(avx2_fma_f16c, avx_vnni, avx512_vnni, avx512_bf16);
    size_t i = sizeof ops_table / sizeof ops_table[0];
    while (--i > 0 && (ops_needs[i] & ~have)) {}
    return ops_table[i].name; /* row 0, scalar, needs nothing */
}

bool kern_variant_runs(const char *variant, bool avx2_fma_f16c, bool avx_vnni, bool avx512_vnni, bool avx512_bf16)
{
    int r = kern_variant_rank(variant);
    return r >= 0 && !(ops_needs[r] & ~cpu_has(avx2_fma_f16c, avx_vnni, avx512_vnni, avx512_bf16));
}
