/* Tests of the SIMD sequence kernels (attn_avx2.c, attn_avx512.c, gdn_avx2.c, gdn_avx512.c)
 * through kern_ops: the attn and gdn_step of every variant equal the scalar kern_attn /
 * kern_gdn_step bit for bit (memcmp of the whole output and state buffers, untouched heads
 * and cache gaps included), for head sizes with and without a vector tail, several steps in
 * a row, head subranges and signed zeros. A variant the CPU lacks is skipped, with a message
 * saying so. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t rec_rng;
static void rec_seed(uint64_t s) { rec_rng = s * 0x9E3779B97F4A7C15ull + 11; }
static uint64_t rec_next(void)
{
    uint64_t z = (rec_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1) times 2^e, e in [-4, 4]; every 16th value a signed zero. */
static float rec_val(void)
{
    uint64_t r = rec_next();
    if (r % 16 == 0) return (r & 16) ? -0.0f : 0.0f;
    float u = (float)((double)(rec_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    return ldexpf(u, (int)(rec_next() % 9) - 4);
}
static void rec_fill(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = rec_val();
}

static const struct kern_ops *rec_variant_or_skip(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    cr_assert_not_null(ops->attn);
    cr_assert_not_null(ops->gdn_step);
    return ops;
}

/* GDN: 3 tokens through scalar and the variant from the same state; state and outputs equal. */
static void rec_gdn(const char *variant)
{
    const struct kern_ops *v = rec_variant_or_skip(variant), *s = kern_ops_for("scalar");
    cr_assert_eq(s->gdn_step, kern_gdn_step);
    static const int64_t dks[] = { 1, 5, 32, 128 };
    static const int64_t dvs[] = { 1, 7, 8, 16, 37, 128, 131, 200 };
    const int64_t hk = 2, hv = 4;
    rec_seed(1);
    for (size_t a = 0; a < sizeof(dks) / sizeof(dks[0]); a++) {
        for (size_t b = 0; b < sizeof(dvs) / sizeof(dvs[0]); b++) {
            int64_t dk = dks[a], dv = dvs[b], ns = hv * dk * dv;
            float *S1 = malloc((size_t)ns * sizeof(float)), *S2 = malloc((size_t)ns * sizeof(float));
            float *o1 = malloc((size_t)(hv * dv) * sizeof(float)), *o2 = malloc((size_t)(hv * dv) * sizeof(float));
            float q[2 * 128], k[2 * 128], vv[4 * 200], al[4], be[4];
            rec_fill(S1, ns);
            memcpy(S2, S1, (size_t)ns * sizeof(float));
            rec_fill(o1, hv * dv);
            memcpy(o2, o1, (size_t)(hv * dv) * sizeof(float));
            for (int t = 0; t < 3; t++) {
                rec_fill(q, hk * dk);
                rec_fill(k, hk * dk);
                rec_fill(vv, hv * dv);
                for (int h = 0; h < hv; h++) {
                    al[h] = (float)((rec_next() >> 40) + 1) / (float)(1 << 24); /* (0, 1] */
                    be[h] = (float)(rec_next() >> 40) / (float)(1 << 24);
                }
                /* the last token runs heads 1..3 only: head 0 must stay as it was */
                int64_t h0 = t == 2 ? 1 : 0;
                s->gdn_step(o1, S1, q, k, vv, al, be, hk, hv, dk, dv, h0, hv);
                v->gdn_step(o2, S2, q, k, vv, al, be, hk, hv, dk, dv, h0, hv);
                cr_assert(memcmp(S1, S2, (size_t)ns * sizeof(float)) == 0,
                          "%s gdn state differs: dk %lld dv %lld token %d", variant, (long long)dk, (long long)dv, t);
                cr_assert(memcmp(o1, o2, (size_t)(hv * dv) * sizeof(float)) == 0,
                          "%s gdn output differs: dk %lld dv %lld token %d", variant, (long long)dk, (long long)dv, t);
            }
            free(S1);
            free(S2);
            free(o1);
            free(o2);
        }
    }
}

/* Attention over n_pos cached keys (rows with a gap after the kv heads); outputs equal. */
static void rec_attn_heads(const char *variant, int64_t nh, int64_t nkv);
static void rec_attn(const char *variant)
{
    rec_attn_heads(variant, 4, 2);
    rec_attn_heads(variant, 8, 2);  /* groups of 4: one batched run per kv head */
    rec_attn_heads(variant, 6, 1);  /* a group of 6: runs of 4 and 2 */
    rec_attn_heads(variant, 3, 3);  /* no sharing */
}

/* nh query heads over nkv kv heads; the head subrange [1, 3) too. */
static void rec_attn_heads(const char *variant, int64_t nh, int64_t nkv)
{
    const struct kern_ops *v = rec_variant_or_skip(variant), *s = kern_ops_for("scalar");
    cr_assert_eq(s->attn, kern_attn);
    static const int64_t hds[] = { 1, 7, 16, 19, 128, 131, 256 };
    /* past one and several blocks of a variant's key blocking (attn_avx512.c note 5), odd and even */
    static const int64_t nps[] = { 1, 2, 5, 40, 97, 130 };
    rec_seed(2 + (uint64_t)nh);
    for (size_t a = 0; a < sizeof(hds) / sizeof(hds[0]); a++) {
        for (size_t b = 0; b < sizeof(nps) / sizeof(nps[0]); b++) {
            int64_t hd = hds[a], np = nps[b], ld = nkv * hd + 3;
            float *q = malloc((size_t)(nh * hd) * sizeof(float));
            float *kc = malloc((size_t)(np * ld) * sizeof(float)), *vc = malloc((size_t)(np * ld) * sizeof(float));
            float *o1 = malloc((size_t)(nh * hd) * sizeof(float)), *o2 = malloc((size_t)(nh * hd) * sizeof(float));
            float sc1[KERN_ATTN_HEADS * 130], sc2[KERN_ATTN_HEADS * 130];
            rec_fill(q, nh * hd);
            rec_fill(kc, np * ld);
            rec_fill(vc, np * ld);
            rec_fill(o1, nh * hd);
            memcpy(o2, o1, (size_t)(nh * hd) * sizeof(float));
            float scale = 1.0f / sqrtf((float)hd);
            s->attn(o1, q, kc, vc, ld, np, hd, nh, nkv, scale, sc1, 0, nh);
            v->attn(o2, q, kc, vc, ld, np, hd, nh, nkv, scale, sc2, 0, nh);
            cr_assert(memcmp(o1, o2, (size_t)(nh * hd) * sizeof(float)) == 0,
                      "%s attention differs: hd %lld n_pos %lld", variant, (long long)hd, (long long)np);
            /* a head subrange leaves the other heads alone */
            rec_fill(o1, nh * hd);
            memcpy(o2, o1, (size_t)(nh * hd) * sizeof(float));
            s->attn(o1, q, kc, vc, ld, np, hd, nh, nkv, scale, sc1, 1, 3);
            v->attn(o2, q, kc, vc, ld, np, hd, nh, nkv, scale, sc2, 1, 3);
            cr_assert(memcmp(o1, o2, (size_t)(nh * hd) * sizeof(float)) == 0,
                      "%s attention heads 1..2 differ: hd %lld n_pos %lld", variant, (long long)hd, (long long)np);
            free(q);
            free(kc);
            free(vc);
            free(o1);
            free(o2);
        }
    }
}

/* The data can tell orders apart: summing the GDN read-out in another order changes bits,
 * so equality above is not an accident of benign data. */
Test(kern_simd_attn_gdn, order_sensitive)
{
    rec_seed(3);
    float x[128], y[128];
    rec_fill(x, 128);
    rec_fill(y, 128);
    float fw = 0.0f, bw = 0.0f;
    for (int i = 0; i < 128; i++) fw = fmaf(x[i], y[i], fw);
    for (int i = 127; i >= 0; i--) bw = fmaf(x[i], y[i], bw);
    cr_assert_neq(fw, bw);
}

Test(kern_simd_attn_gdn, gdn_avx2) { rec_gdn("avx2"); }
Test(kern_simd_attn_gdn, gdn_avx512) { rec_gdn("avx512"); }
Test(kern_simd_attn_gdn, attn_avx2) { rec_attn("avx2"); }
Test(kern_simd_attn_gdn, attn_avx512) { rec_attn("avx512"); }

/* kern_attn_tokens of every variant (and the scalar one) equals one scalar kern_attn call
 * per query, bit for bit: n_tok 1..KERN_ATTN_TOKS consecutive queries, head sizes with and
 * without a 32-multiple (the batched path needs one), GQA groups of 1..8, short and long
 * key ranges (the later queries' own keys included), head subranges; outputs of heads
 * outside the range untouched. */
static void rec_attn_tokens(const char *variant, int64_t nh, int64_t nkv)
{
    const struct kern_ops *v = strcmp(variant, "scalar") ? rec_variant_or_skip(variant) : kern_ops_for("scalar");
    static const int64_t hds[] = { 16, 48, 64, 256 };
    static const int64_t nps[] = { 1, 2, 3, 7, 70, 145 };
    rec_seed(40 + (uint64_t)(nh * 7 + nkv));
    for (size_t a = 0; a < sizeof(hds) / sizeof(hds[0]); a++)
        for (size_t b = 0; b < sizeof(nps) / sizeof(nps[0]); b++)
            for (int64_t nt = 1; nt <= KERN_ATTN_TOKS; nt++)
                for (int sub = 0; sub < 2; sub++) {
                    int64_t hd = hds[a], np0 = nps[b], ld = nkv * hd + 5, np = np0 + nt - 1;
                    int64_t q_ld = nh * hd + 3, o_ld = nh * hd + 2;
                    int64_t h0 = sub ? 1 : 0, h1 = sub ? HS_MIN(nh, 6) : nh;
                    float *q = malloc((size_t)(nt * q_ld) * sizeof(float));
                    float *kc = malloc((size_t)(np * ld) * sizeof(float)), *vc = malloc((size_t)(np * ld) * sizeof(float));
                    float *o1 = malloc((size_t)(nt * o_ld) * sizeof(float)), *o2 = malloc((size_t)(nt * o_ld) * sizeof(float));
                    float *sc1 = malloc((size_t)(KERN_ATTN_HEADS * np) * sizeof(float));
                    float *sc2 = malloc((size_t)(KERN_ATTN_TOKS * KERN_ATTN_HEADS * np) * sizeof(float));
                    rec_fill(q, nt * q_ld);
                    rec_fill(kc, np * ld);
                    rec_fill(vc, np * ld);
                    rec_fill(o1, nt * o_ld);
                    memcpy(o2, o1, (size_t)(nt * o_ld) * sizeof(float));
                    float scale = 1.0f / sqrtf((float)hd);
                    for (int64_t i = 0; i < nt; i++)
                        kern_attn(o1 + i * o_ld, q + i * q_ld, kc, vc, ld, np0 + i, hd, nh, nkv, scale, sc1, h0, h1);
                    v->attn_tokens(o2, o_ld, q, q_ld, kc, vc, ld, np0, nt, hd, nh, nkv, scale, sc2, h0, h1);
                    cr_assert(memcmp(o1, o2, (size_t)(nt * o_ld) * sizeof(float)) == 0,
                              "%s attn_tokens differs: heads %lld/%lld [%lld, %lld), hd %lld, n_pos0 %lld, n_tok %lld",
                              variant, (long long)nh, (long long)nkv, (long long)h0, (long long)h1, (long long)hd,
                              (long long)np0, (long long)nt);
                    free(q);
                    free(kc);
                    free(vc);
                    free(o1);
                    free(o2);
                    free(sc1);
                    free(sc2);
                }
}

static void rec_attn_tokens_all(const char *variant)
{
    rec_attn_tokens(variant, 8, 2);  /* groups of 4 */
    rec_attn_tokens(variant, 6, 2);  /* groups of 3 */
    rec_attn_tokens(variant, 16, 2); /* groups of 8: runs of 4 */
    rec_attn_tokens(variant, 4, 4);  /* no sharing */
    rec_attn_tokens(variant, 2, 1);  /* a group of 2 */
}

Test(kern_simd_attn_gdn, attn_tokens_scalar) { rec_attn_tokens_all("scalar"); }
Test(kern_simd_attn_gdn, attn_tokens_avx2) { rec_attn_tokens_all("avx2"); }
Test(kern_simd_attn_gdn, attn_tokens_avx512) { rec_attn_tokens_all("avx512"); }
