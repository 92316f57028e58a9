/* test_session.c — the request path (server/session.c) and its SHA-256:
 *   1. SHA-256 against FIPS 180-4 vectors ("", "abc", the 448-bit message, a million 'a')
 *      and lengths around the padding boundaries (55, 56, 63, 64, 119, 120, 1000 bytes);
 *   2. two models of the same geometry (mkmodel seeds 3 and 4) sharing one bank: nothing
 *      made by one is restored by the other (fingerprint key spaces), while each reuses its
 *      own state; every banked run's first logits and output equal the run with no bank;
 *      the streamed text equals the report's text;
 *   3. a body the API parser refuses fails cleanly (nothing to free, ASan-clean);
 *   4. the server's hooks: the start hook sees the report's prompt/cached numbers before the
 *      prefill; false from it stops with nothing generated or banked; false from the text
 *      callback stops after that token (what was generated is banked); a prompt of n_ctx
 *      tokens or more is API_ERR_CONTEXT in OpenAI's overflow wording with both numbers;
 *      n_ctx clamps max_tokens. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "mkmodel/mkmodel.h"
#include "unit/server/session_test.h"

/* ---- sessions on tiny models ------------------------------------------------------------ */

static char ss_dir[64];

static int ss_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void ss_setup(void)
{
    strcpy(ss_dir, "/tmp/hs-sess.XXXXXX");
    cr_assert_not_null(mkdtemp(ss_dir));
}

static void ss_teardown(void) { nftw(ss_dir, ss_rm, 16, FTW_DEPTH | FTW_PHYS); }

struct ss_model {
    struct model *m;
    struct model_text mt;
    struct engine *e;
};

static void ss_open(struct ss_model *x, uint64_t seed)
{
    char out[160];
    snprintf(out, sizeof(out), "%s/m%llu.gguf", ss_dir, (unsigned long long)seed);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.arch = MODEL_ARCH_QWEN35;
    o.dtype = DTYPE_Q8_0;
    o.seed = seed;
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "mkmodel: %s", err.msg);
    memset(x, 0, sizeof(*x));
    cr_assert_eq(model_load(out, &x->m, &err), 0, "%s", err.msg);
    cr_assert_eq(model_text_load(x->m, &x->mt, &err), 0, "%s", err.msg);
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = 1;
    cr_assert_eq(engine_new(x->m, &eo, &x->e, &err), 0, "%s", err.msg);
}

static void ss_close(struct ss_model *x)
{
    engine_free(x->e);
    model_text_free(&x->mt);
    model_free(x->m);
}

/* An OpenAI body: a system turn long enough for a head anchor, then one user turn. */
static json_t *ss_body(const char *user)
{
    char sys[2048] = "";
    for (int i = 0; i < 14; i++) strcat(sys, "You are a careful agent; read before you write. ");
    return json_pack("{s:s, s:i, s:[{s:s, s:s}, {s:s, s:s}]}", "model", "x", "max_tokens", 5, "messages", "role",
                     "system", "content", sys, "role", "user", "content", user);
}

static bool ss_collect(void *ctx, const char *text, size_t len)
{
    strbuf_append(ctx, text, len);
    return true;
}

static void ss_run(struct ss_model *x, struct bank *b, const json_t *body, struct session_report *r)
{
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0;
    struct strbuf streamed;
    strbuf_init(&streamed);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(test_session_run_body(x->e, &x->mt, b, body, &so, ss_collect, &streamed, r, &err), 0,
                 "session_run: %s", err.msg);
    cr_assert_eq(streamed.len, r->text_len);
    if (r->text_len) cr_assert_eq(memcmp(streamed.buf, r->text, r->text_len), 0);
    cr_assert_eq(strlen(r->first_logits_sha256), 64);
    cr_assert_gt(r->n_output, 0);
    strbuf_free(&streamed);
}

static void ss_same(const struct session_report *a, const struct session_report *b)
{
    cr_assert_str_eq(a->first_logits_sha256, b->first_logits_sha256);
    cr_assert_eq(a->n_output, b->n_output);
    cr_assert_eq(memcmp(a->output_ids, b->output_ids, (size_t)a->n_output * sizeof(int32_t)), 0);
}

Test(session_bank, no_reuse_across_models, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x, y;
    ss_open(&x, 3);
    ss_open(&y, 4);
    cr_assert_neq(engine_fingerprint(x.e), engine_fingerprint(y.e));
    json_t *a = ss_body("List the files."), *bb = ss_body("Explain the cache.");
    struct bank *bank = bank_init(NULL);
    struct session_report xa, xb, yb, yb2, yref, xref;

    ss_run(&x, bank, a, &xa);
    cr_assert_eq(xa.cached_tokens, 0);
    cr_assert_gt(xa.head_tokens, BANK_DEFAULT_MIN_HEAD);
    ss_run(&x, bank, bb, &xb);
    cr_assert_eq(xb.cached_tokens, xb.head_tokens, "same model: restore at the head");
    cr_assert_str_eq(bank_source_name(xb.cache_source), "ram");
    ss_run(&x, NULL, bb, &xref);
    ss_same(&xb, &xref);
    cr_assert_eq(xref.cached_tokens, 0);
    cr_assert(!xref.bank_used);

    /* the other model sees nothing of the first one's state */
    ss_run(&y, bank, bb, &yb);
    cr_assert_eq(yb.cached_tokens, 0, "state of another model restored");
    cr_assert_eq(yb.match_len, 0);
    cr_assert_str_eq(bank_source_name(yb.cache_source), "none");
    ss_run(&y, NULL, bb, &yref);
    ss_same(&yb, &yref);
    cr_assert_str_neq(yb.first_logits_sha256, xb.first_logits_sha256);
    /* ... but reuses its own */
    ss_run(&y, bank, bb, &yb2);
    cr_assert_gt(yb2.cached_tokens, yb2.head_tokens);
    cr_assert_lt(yb2.cached_tokens, yb2.prompt_tokens);
    ss_same(&yb2, &yref);

    struct bank_stats st;
    bank_stats_get(bank, &st);
    cr_assert_eq(st.n_spaces, 2);
    cr_assert_eq(st.hits, 2);

    session_report_free(&xa); session_report_free(&xb); session_report_free(&xref);
    session_report_free(&yb); session_report_free(&yb2); session_report_free(&yref);
    session_report_free(NULL);
    bank_free(bank);
    json_decref(a);
    json_decref(bb);
    ss_close(&y);
    ss_close(&x);
}

Test(session_bank, bad_body_fails_cleanly, .init = ss_setup, .fini = ss_teardown)
{
    struct ss_model x;
    ss_open(&x, 3);
    json_t *body = json_pack("{s:s, s:i}", "model", "x", "messages", 3);
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    struct session_report r;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank *bank = bank_init(NULL);
    cr_assert_neq(test_session_run_body(x.e, &x.mt, bank, body, &so, NULL, NULL, &r, &err), 0);
    cr_assert_gt(strlen(err.msg), 0);
    cr_assert_null(r.output_ids);
    struct bank_stats st;
    bank_stats_get(bank, &st);
    cr_assert_eq(st.inserts, 0);
    bank_free(bank);
    json_decref(body);
    ss_close(&x);
}

/* ---- the server's hooks ----------------------------------------------------------------- */

struct ss_hooks {
    int starts, texts;
    int stop_start;           /* 1: the start hook says stop */
    int stop_after;           /* > 0: the text callback says stop on this call */
    struct session_start st;
};

static bool ss_on_start(void *ctx, const struct session_start *st)
{
    struct ss_hooks *h = ctx;
    h->starts++;
    h->st = *st;
    return !h->stop_start;
}

static bool ss_on_text(void *ctx, const char *text, size_t len)
{
    struct ss_hooks *h = ctx;
    (void)text; (void)len;
    return ++h->texts != h->stop_after;
}

static int ss_hook_run(struct ss_model *x, struct bank *b, const json_t *body, int64_t n_ctx, int64_t max_tokens,
                       struct ss_hooks *h, struct session_report *r, struct hs_err *err)
{
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0;
    so.n_ctx = n_ctx;
    so.max_tokens = max_tokens;
    so.ignore_eos = true; /* a random tiny model may stop at once */
    so.on_start = ss_on_start;
    hs_err_clear(err);
    return test_session_run_body(x->e, &x->mt, b, body, &so, ss_on_text, h, r, err);
}

Test(session_hooks, start_cancel_ctx, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x;
    ss_open(&x, 3);
    json_t *a = ss_body("List the files.");
    struct bank *bank = bank_init(NULL);
    struct session_report r;
    struct hs_err err;

    /* the start hook stops: nothing generated, nothing banked */
    struct ss_hooks h0 = { .stop_start = 1 };
    cr_assert_eq(ss_hook_run(&x, bank, a, 0, 4, &h0, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(h0.starts, 1);
    cr_assert_eq(h0.texts, 0);
    cr_assert_eq(r.n_output, 0);
    cr_assert_str_eq(session_stop_name(r.stop_reason), "cancelled");
    cr_assert_not(r.banked);
    cr_assert_eq(r.prefilled_tokens, 0, "a cancel from the start hook comes before the prefill");
    cr_assert_eq(h0.st.prompt_tokens, r.prompt_tokens);
    cr_assert_gt(r.prompt_tokens, 0);
    /* thinking: what the rendered prompt says */
    struct chat_request cr;
    struct strbuf pr;
    strbuf_init(&pr);
    cr_assert_eq(chat_from_openai(a, &cr, &err), 0);
    cr_assert_eq(chat_template_render(x.mt.tmpl, &cr, &pr, &err), 0);
    bool open_think = pr.len >= 8 && !memcmp(pr.buf + pr.len - 8, "<think>\n", 8);
    cr_assert_eq(h0.st.thinking, open_think);
    chat_request_free(&cr);
    strbuf_free(&pr);
    int64_t n = r.prompt_tokens;
    session_report_free(&r);
    struct bank_stats st;
    bank_stats_get(bank, &st);
    cr_assert_eq(st.inserts, 0);

    /* the text callback stops on its 2nd call: two tokens, banked */
    struct ss_hooks h1 = { .stop_after = 2 };
    cr_assert_eq(ss_hook_run(&x, bank, a, 0, 6, &h1, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(h1.texts, 2);
    cr_assert_eq(r.n_output, 2);
    cr_assert_str_eq(session_stop_name(r.stop_reason), "cancelled");
    cr_assert(r.banked);
    session_report_free(&r);

    /* again: the start hook sees what the report says (a restore now) */
    struct ss_hooks h2 = { 0 };
    cr_assert_eq(ss_hook_run(&x, bank, a, 0, 3, &h2, &r, &err), 0, "%s", err.msg);
    cr_assert_gt(r.cached_tokens, 0);
    cr_assert_eq(h2.st.cached_tokens, r.cached_tokens);
    cr_assert_eq(h2.st.prompt_tokens, r.prompt_tokens);
    cr_assert_eq(r.n_output, 3, "ignore_eos: to max_tokens");
    cr_assert_str_eq(session_stop_name(r.stop_reason), "length");
    cr_assert_geq(h2.texts, 3, "one call per token at least");
    session_report_free(&r);

    /* the context: a prompt of n_ctx tokens is refused naming both numbers; n + 2 leaves 2 */
    struct ss_hooks h3 = { 0 };
    cr_assert_eq(ss_hook_run(&x, bank, a, n, 4, &h3, &r, &err), API_ERR_CONTEXT);
    char want[128];
    snprintf(want, sizeof(want), "maximum context length is %lld tokens. However, your messages resulted in %lld tokens",
             (long long)n, (long long)n);
    cr_assert_not_null(strstr(err.msg, want), "%s", err.msg);
    cr_assert_eq(h3.starts, 0);
    cr_assert_null(r.output_ids);
    cr_assert_eq(ss_hook_run(&x, NULL, a, n + 2, 10, &h3, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n_output, 2);
    session_report_free(&r);

    bank_free(bank);
    json_decref(a);
    ss_close(&x);
}

/* ---- stop strings, tool_choice, the prefill hook ------------------------------------------ */

/* A body with thinking off (stop strings do not match in reasoning); `extra` is merged in. */
static json_t *sc_body(const char *user, int max_tokens, json_t *extra)
{
    json_t *b = ss_body(user);
    json_object_set_new(b, "max_tokens", json_integer(max_tokens));
    json_object_set_new(b, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 0));
    json_object_set_new(b, "ignore_eos", json_true());
    if (extra) json_object_update(b, extra);
    json_decref(extra);
    return b;
}

static void sc_run(struct ss_model *x, const json_t *body, struct session_report *r)
{
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0;
    so.ignore_eos = true;
    struct strbuf streamed;
    strbuf_init(&streamed);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(test_session_run_body(x->e, &x->mt, NULL, body, &so, ss_collect, &streamed, r, &err), 0,
                 "session_run: %s", err.msg);
    cr_assert_eq(streamed.len, r->text_len, "the streamed text is the report's");
    if (r->text_len) cr_assert_eq(memcmp(streamed.buf, r->text, r->text_len), 0);
    strbuf_free(&streamed);
}

Test(session_controls, stop_sequence, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x;
    ss_open(&x, 3);
    struct session_report full, cut;
    json_t *b0 = sc_body("Say something.", 24, NULL);
    sc_run(&x, b0, &full);
    cr_assert_str_eq(session_stop_name(full.stop_reason), "length");
    cr_assert_null(full.stop_sequence);
    cr_assert_null(strstr(full.text, "<think>"), "the random model wrote a tag: pick another seed");
    cr_assert_null(strstr(full.text, "<tool_call>"));
    /* a stop string from the middle of the output: 3 printable ASCII bytes */
    size_t p = full.text_len / 2;
    while (p + 3 <= full.text_len &&
           !(full.text[p] > ' ' && full.text[p] < 127 && full.text[p + 1] > ' ' && full.text[p + 1] < 127 &&
             full.text[p + 2] > ' ' && full.text[p + 2] < 127))
        p++;
    cr_assert_leq(p + 3, full.text_len, "no ASCII run in '%s'", full.text);
    char stop[4] = { full.text[p], full.text[p + 1], full.text[p + 2], 0 };
    size_t first = (size_t)(strstr(full.text, stop) - full.text);
    json_t *b1 = sc_body("Say something.", 24, json_pack("{s:[s,s]}", "stop", "\x01never", stop));
    sc_run(&x, b1, &cut);
    cr_assert_str_eq(session_stop_name(cut.stop_reason), "stop_sequence");
    cr_assert_str_eq(cut.stop_sequence, stop);
    /* the text ends right before the string; the token that completed it is the last one */
    cr_assert_eq(cut.text_len, first, "text '%s', stop '%s'", cut.text, stop);
    cr_assert_eq(memcmp(cut.text, full.text, first), 0);
    cr_assert_lt(cut.n_output, full.n_output);
    cr_assert_eq(memcmp(cut.output_ids, full.output_ids, (size_t)cut.n_output * sizeof(int32_t)), 0);
    struct strbuf js;
    strbuf_init(&js);
    session_report_json(&cut, &js);
    cr_assert_not_null(strstr(js.buf, "\"stop_reason\":\"stop_sequence\",\"stop_sequence\":"));
    strbuf_free(&js);
    session_report_free(&cut);
    session_report_free(&full);
    json_decref(b0);
    json_decref(b1);
    ss_close(&x);
}

struct sc_prefill {
    int calls;
    int stop_at;              /* > 0: the hook says stop on this call */
    int64_t last_done, total;
    bool ordered;
    int starts;
    struct strbuf forced;
};

static bool sc_on_prefill(void *ctx, int64_t done, int64_t total)
{
    struct sc_prefill *h = ctx;
    h->calls++;
    if (done <= h->last_done || done >= total) h->ordered = false;
    h->last_done = done;
    h->total = total;
    return h->calls != h->stop_at;
}

static bool sc_on_start(void *ctx, const struct session_start *st)
{
    struct sc_prefill *h = ctx;
    h->starts++;
    strbuf_append(&h->forced, st->forced_text, st->forced_len);
    return true;
}

static bool sc_text(void *ctx, const char *text, size_t len) { (void)ctx; (void)text; (void)len; return true; }

static int sc_hook_run(struct ss_model *x, struct bank *b, const json_t *body, bool hook, struct sc_prefill *h,
                       struct session_report *r)
{
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0;
    so.max_tokens = 3;
    so.ignore_eos = true;
    so.on_start = sc_on_start;
    if (hook) so.on_prefill = sc_on_prefill;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = test_session_run_body(x->e, &x->mt, b, body, &so, sc_text, h, r, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    return rc;
}

Test(session_controls, prefill_chunks_and_cancel, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x;
    ss_open(&x, 3);
    struct strbuf user;
    strbuf_init(&user);
    for (int i = 0; i < 600; i++) strbuf_printf(&user, "item %d; ", i);
    json_t *body = sc_body(user.buf, 3, NULL);
    struct session_report one, chunked, cancelled;
    struct sc_prefill h0 = { .ordered = true }, h1 = { .ordered = true }, h2 = { .ordered = true, .stop_at = 1 };
    sc_hook_run(&x, NULL, body, false, &h0, &one);
    cr_assert_gt(one.prompt_tokens, 2000);
    sc_hook_run(&x, NULL, body, true, &h1, &chunked);
    /* chunks start at 64 tokens: a prompt this long takes more than one */
    cr_assert_geq(h1.calls, 1);
    cr_assert(h1.ordered, "done grows and stays below the total");
    cr_assert_eq(h1.total, chunked.prompt_tokens);
    cr_assert_eq(chunked.prefilled_tokens, chunked.prompt_tokens, "a finished prefill computed every token");
    cr_assert_eq(one.prefilled_tokens, one.prompt_tokens);
    /* the same logits and tokens however the prefill was cut (docs/DESIGN.md §4) */
    ss_same(&one, &chunked);
    /* the hook says stop: nothing generated, nothing banked */
    struct bank *bank = bank_init(NULL);
    sc_hook_run(&x, bank, body, true, &h2, &cancelled);
    cr_assert_eq(h2.calls, 1);
    cr_assert_str_eq(session_stop_name(cancelled.stop_reason), "cancelled");
    cr_assert_eq(cancelled.n_output, 0);
    /* the report says how far the cut prefill got: what the hook was told, nothing restored */
    cr_assert_eq(cancelled.cached_tokens, 0);
    cr_assert_eq(cancelled.prefilled_tokens, h2.last_done);
    cr_assert(cancelled.prefilled_tokens > 0 && cancelled.prefilled_tokens < cancelled.prompt_tokens);
    cr_assert_not(cancelled.banked);
    struct bank_stats st;
    bank_stats_get(bank, &st);
    cr_assert_eq(st.inserts, 0);
    bank_free(bank);
    session_report_free(&one);
    session_report_free(&chunked);
    session_report_free(&cancelled);
    strbuf_free(&h0.forced);
    strbuf_free(&h1.forced);
    strbuf_free(&h2.forced);
    strbuf_free(&user);
    json_decref(body);
    ss_close(&x);
}

Test(session_controls, forced_tool_call, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x;
    ss_open(&x, 3);
    json_t *tools = json_pack("[{s:s, s:{s:s, s:{s:s}}}]", "type", "function", "function", "name", "read", "parameters",
                              "type", "object");
    json_t *plain = sc_body("Read it.", 4, json_pack("{s:O}", "tools", tools));
    json_t *named = sc_body("Read it.", 4, json_pack("{s:O, s:{s:s, s:{s:s}}}", "tools", tools, "tool_choice", "type",
                                                     "function", "function", "name", "read"));
    json_t *any = sc_body("Read it.", 4, json_pack("{s:O, s:s}", "tools", tools, "tool_choice", "required"));
    json_t *none = sc_body("Read it.", 4, json_pack("{s:O, s:s}", "tools", tools, "tool_choice", "none"));
    struct session_report rp, rn, ra, rz;
    struct sc_prefill hp = { 0 }, hn = { 0 }, ha = { 0 }, hz = { 0 };
    sc_hook_run(&x, NULL, plain, false, &hp, &rp);
    sc_hook_run(&x, NULL, named, false, &hn, &rn);
    sc_hook_run(&x, NULL, any, false, &ha, &ra);
    sc_hook_run(&x, NULL, none, false, &hz, &rz);
    cr_assert_null(rp.forced_text);
    cr_assert_eq(hp.forced.len, 0);
    /* the tiny model's template is Qwen3.5's (XML calls); thinking is off here */
    cr_assert_not_null(strstr(x.mt.tmpl_source, "<function="));
    cr_assert_str_eq(rn.forced_text, "<tool_call>\n<function=read>\n");
    cr_assert_str_eq(ra.forced_text, "<tool_call>\n");
    cr_assert_eq(hn.forced.len, strlen(rn.forced_text));
    cr_assert_eq(memcmp(hn.forced.buf, rn.forced_text, hn.forced.len), 0, "the start hook sees the forced text");
    /* the forced text is part of the prompt: more tokens than the plain request */
    cr_assert_gt(rn.prompt_tokens, ra.prompt_tokens);
    cr_assert_gt(ra.prompt_tokens, rp.prompt_tokens);
    /* none: tools still rendered (the same prompt, the head stays), no forced text */
    cr_assert_eq(rz.prompt_tokens, rp.prompt_tokens);
    cr_assert_null(rz.forced_text);
    session_report_free(&rp);
    session_report_free(&rn);
    session_report_free(&ra);
    session_report_free(&rz);
    strbuf_free(&hp.forced);
    strbuf_free(&hn.forced);
    strbuf_free(&ha.forced);
    strbuf_free(&hz.forced);
    json_decref(tools);
    json_decref(plain);
    json_decref(named);
    json_decref(any);
    json_decref(none);
    ss_close(&x);
}

/* ---- several requests stepped together ([F10]) ------------------------------------------
 * Four requests (one greedy, two sampled with seeds, one with a bank restore of a head the
 * first banked) run alone through session_run, then as sessions whose engine work
 * (session_work) goes into shared engine_forward_batch steps of at most 9 tokens, in
 * rotating order: every one gives the same first logits, output ids and text as alone. */
#define SB_N 4

static json_t *sb_body(int k)
{
    static const char *const users[SB_N] = { "List the files.", "Say hello in three languages, please.",
                                             "Count to five.", "List the files, then read the largest one." };
    json_t *b = ss_body(users[k]);
    json_object_set_new(b, "max_tokens", json_integer(6 + k));
    if (k == 1 || k == 2) {
        json_object_set_new(b, "temperature", json_real(0.8));
        json_object_set_new(b, "seed", json_integer(100 + k));
    }
    return b;
}

static struct session *sb_new(struct ss_model *x, struct bank *bank, const json_t *body, struct api_request *req)
{
    struct api_sampling defaults;
    session_sampling_defaults(&defaults);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(api_request_parse(API_KIND_OPENAI_CHAT, body, &defaults, req, &err), 0, "%s", err.msg);
    struct session_opts so = { 0 };
    session_sampling_opts(&req->sampling, req->sampling.seed_given ? (uint64_t)req->sampling.seed : 0, &so.sampling);
    struct session *s = NULL;
    cr_assert_eq(session_new(x->e, &x->mt, bank, req, &so, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(session_restore(s, &err), 0, "%s", err.msg);
    return s;
}

Test(session_steps, batched_equals_alone, .init = ss_setup, .fini = ss_teardown, .timeout = 120)
{
    struct ss_model x;
    ss_open(&x, 41);
    struct session_report alone[SB_N];
    for (int k = 0; k < SB_N; k++) {
        struct bank *bank = bank_init(NULL);
        json_t *body = sb_body(k);
        struct api_sampling defaults;
        session_sampling_defaults(&defaults);
        struct api_request req;
        struct hs_err err;
        hs_err_clear(&err);
        cr_assert_eq(api_request_parse(API_KIND_OPENAI_CHAT, body, &defaults, &req, &err), 0);
        struct session_opts so = { 0 };
        session_sampling_opts(&req.sampling, req.sampling.seed_given ? (uint64_t)req.sampling.seed : 0, &so.sampling);
        cr_assert_eq(session_run(x.e, &x.mt, bank, &req, &so, NULL, NULL, &alone[k], &err), 0, "%s", err.msg);
        api_request_free(&req);
        json_decref(body);
        bank_free(bank);
    }
    /* together, with one bank: the first three join at steps 0, 3, 6; request 3 shares
     * request 0's head and joins after 0 ended (banked), so it restores that head */
    struct bank *bank = bank_init(NULL);
    int64_t V = model_hparams(x.m)->n_vocab;
    float *logits = malloc((size_t)(SB_N * V) * sizeof(float));
    struct session *s[SB_N] = { 0 };
    struct api_request req[SB_N];
    json_t *body[SB_N];
    struct strbuf text[SB_N];
    bool over[SB_N] = { false };
    int joined = 0, steps = 0, mixed = 0;
    struct hs_err err;
    hs_err_clear(&err);
    while (joined < SB_N || !over[0] || !over[1] || !over[2] || !over[3]) {
        /* a new request joins every third step (request 3 only after 0 ended) */
        if (joined < SB_N && steps % 3 == 0 && (joined < 3 || over[0])) {
            body[joined] = sb_body(joined);
            strbuf_init(&text[joined]);
            s[joined] = sb_new(&x, bank, body[joined], &req[joined]);
            joined++;
        }
        struct engine_item it[SB_N];
        int who[SB_N], n = 0;
        int64_t left = 9;
        for (int q = 0; q < joined; q++) {
            int k = (q + steps) % joined;
            if (over[k] || left == 0) continue;
            int64_t w = session_work(s[k], left, &it[n]);
            if (!w) continue;
            who[n++] = k;
            left -= w;
        }
        if (n > 0) cr_assert_eq(engine_forward_batch(x.e, it, n, logits, &err), 0, "%s", err.msg);
        steps++;
        mixed += n > 1;
        for (int i = 0, row = 0; i < n; i++) {
            session_work_done(s[who[i]], it[i].n_rows ? logits + (int64_t)row * V : NULL);
            row += it[i].n_rows;
        }
        for (int k = 0; k < joined; k++) {
            if (over[k] || !session_ready_to_sample(s[k])) continue;
            bool emit, done;
            cr_assert_eq(session_generate(s[k], &text[k], &emit, &done, &err), 0, "%s", err.msg);
            if (!done) continue;
            session_generate_end(s[k], &text[k]);
            cr_assert_eq(session_finish(s[k], &err), 0, "%s", err.msg);
            over[k] = true;
        }
        cr_assert_lt(steps, 2000);
    }
    cr_assert_gt(mixed, 5, "only %d steps mixed requests", mixed);
    for (int k = 0; k < SB_N; k++) {
        struct session_report r;
        session_take_report(s[k], &r);
        cr_assert_str_eq(r.first_logits_sha256, alone[k].first_logits_sha256, "request %d: first logits differ", k);
        cr_assert_eq(r.n_output, alone[k].n_output, "request %d", k);
        cr_assert_eq(memcmp(r.output_ids, alone[k].output_ids, (size_t)r.n_output * sizeof(int32_t)), 0,
                     "request %d: tokens differ", k);
        cr_assert_eq(text[k].len, alone[k].text_len);
        if (k == 3) cr_assert_gt(r.cached_tokens, 0, "request 3 restores request 0's head");
        session_report_free(&r);
        session_report_free(&alone[k]);
        session_free(s[k]);
        api_request_free(&req[k]);
        json_decref(body[k]);
        strbuf_free(&text[k]);
    }
    free(logits);
    bank_free(bank);
    ss_close(&x);
}
