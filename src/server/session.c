/*
 * session.c — the request path: one request from its API body to generated tokens, with
 * the session bank around the prefill. `headstart replay` and the HTTP server's engine
 * thread (sched.c) both run it; the server adds a context bound (n_ctx), a start hook
 * (prompt / cached tokens, an open <think>, before the prefill) and cancellation (either
 * callback returns false).
 *
 *   body ─▶ chat_request ─▶ render ─▶ ids ─▶ head / last user turn / generation prompt
 *        ─▶ bank_lookup (RAM) ─▶ bank_disk_lookup for a deeper point (min_pos = the RAM hit)
 *        ─▶ (s > 0) copy KV [0, s) + snapshot from the deeper tier, seq_restore_parts; a disk
 *           hit is also promoted into RAM (bank_insert of its path, rows and snapshot)
 *        ─▶ bank_plan (captures at planned positions > s) ─▶ engine_forward(ids[s, n))
 *           (in chunks, a hook between them, when the caller gives a prefill hook)
 *        ─▶ sample / decode until a stop id or max_tokens (text streamed out)
 *        ─▶ feed the last token, bank_insert(prompt + generated, missing KV rows,
 *           captured snapshots + one at the end of the generated text), and the same
 *           snapshots queued for the disk tier (bank_disk_put copies; never blocks)
 *
 * Invariants:
 *   1. The bank is only read through copies (bank_copy_kv / bank_copy_snapshot) into the
 *      request's own sequence; the hit is released before the prefill starts.
 *   2. Everything restored was made under this engine's fingerprint (the key space): the
 *      process fingerprint for the RAM bank, the persistent one (the model identity,
 *      engine.h) for the disk tier, which is skipped while the engine has none (the
 *      server is still hashing the model: report bank_off "model_identity_unknown").
 *   2a. Before the restore and again before the insert, model_files_check: a model file
 *      changed in place since load means the weights computing now are not the ones the
 *      bank's state was made with (nor what the identity says): no restore, no insert, in
 *      either tier (bank_off "model_changed"); the answer itself is still computed.
 *   3. A restore changes no logits: with or without the bank, the same request gives the
 *      same first logits row and the same tokens (the engine's exactness, docs/DESIGN.md §4).
 *   4. The sequence fed to the bank after generation is at position prompt + generated
 *      (the last sampled token is fed once more without logits), so the END snapshot and
 *      the KV rows describe exactly the inserted path.
 *   5. The disk tier is consulted only for a point deeper than RAM's and only with a RAM
 *      bank; what it hands back is verified by the tier (checksums, identity, the exact
 *      token prefix), and a discarded entry leaves the request cold or at RAM's point.
 *   6. A cancel stops within one generated token (the text callback runs once per token)
 *      or one prefill chunk (with a prefill hook); a cancel from the start hook or the
 *      prefill hook leaves the bank untouched, one during generation banks the prompt and
 *      what was generated (the path is as valid as a finished one). The report says where
 *      it stopped: prefilled_tokens below prompt - cached is a prefill cut part-way.
 *   7. Stop strings (the request's `stop` / `stop_sequences`) are matched on the generated
 *      text by chat_stop (parse.c: answer text only, never inside <think> or a tool call);
 *      text that may still become one is held back, so the text callback never sees any
 *      part of a matched string. tool_choice none ends generation at a `<tool_call>` in
 *      text the same way (stop_reason "stop").
 *   8. tool_choice required / named: the generation prompt is extended with the start of a
 *      call (forced_call_text; an open <think> is closed empty first) so the model can only
 *      continue a call; that text is the answer's start (session_start.forced_text, the
 *      report's forced_text) and what the model writes must complete it — best effort:
 *      a call the model does not finish comes out as text, like any malformed call.
 *   9. TEST ONLY: with serve's HEADSTART_TEST_EMIT on (test_emit.c), the generated ids are
 *      the next scripted text's instead of sampled ones; everything else is unchanged.
 */
#include "server/server.h"
#include "server/server_int.h"
#include "sys/sys.h"

#include <string.h>

static int64_t body_max_tokens(const json_t *body)
{
    static const char *const keys[] = { "max_completion_tokens", "max_output_tokens", "max_tokens" };
    for (size_t i = 0; i < HS_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(body, keys[i]);
        if (json_is_integer(v) && json_integer_value(v) > 0) return (int64_t)json_integer_value(v);
    }
    return 0;
}

/* Position of the last im_start followed by want[0..nw) (any im_start when nw == 0). */
static int64_t last_turn(const int32_t *ids, int64_t n, int32_t im_start, const int32_t *want, size_t nw)
{
    if (im_start < 0) return -1;
    for (int64_t i = n - 1; i >= 0; i--) {
        if (ids[i] != im_start) continue;
        if ((int64_t)nw > n - i - 1) continue;
        if (nw == 0 || !memcmp(ids + i + 1, want, nw * sizeof(int32_t))) return i;
    }
    return -1;
}

/* Entries the disk tier has discarded so far (every verification failure it counts). */
static uint64_t disk_bad_count(struct bank_disk *d)
{
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    return st.bad_checksum + st.bad_header + st.bad_identity + st.bad_tokens + st.bad_size + st.missing_files;
}

/* Promote a verified disk hit into RAM: its path ids[0, p) with the KV rows the tree lacks
 * and the snapshot, so the next request finds it there. A failed insert only loses reuse. */
static void disk_promote(struct bank *bank, uint64_t fp, size_t row_bytes, const struct bank_disk_hit *dh)
{
    struct hs_err e;
    hs_err_clear(&e);
    int64_t kv_from = bank_match_len(bank, fp, dh->ids, dh->pos);
    struct bank_snap_in sn = { dh->pos, dh->kind, dh->snapshot };
    if (bank_insert(bank, fp, dh->ids, dh->pos, kv_from, (const uint8_t *)dh->kv + (size_t)kv_from * row_bytes, &sn, 1,
                    &e) != HS_OK)
        hs_log_write(HS_LOG_WARN, "session: disk hit at %lld not promoted: %s", (long long)dh->pos, e.msg);
}

/* The text a forced tool call appends to the generation prompt (see the design note):
 * `<tool_call>\n` then, for a named tool, the start of its call in the template's format:
 * Qwen3.5's XML (`<function=NAME>\n`) when the template writes <function=, else Qwen3's
 * JSON (`{"name": "NAME", "arguments": `). An open <think> is closed empty first. */
static void forced_call_text(const struct model_text *mt, bool thinking, const char *name, struct strbuf *out)
{
    if (thinking) strbuf_puts(out, "\n</think>\n\n");
    strbuf_puts(out, "<tool_call>\n");
    if (!name) return;
    if (mt->tmpl_source && strstr(mt->tmpl_source, "<function=")) {
        strbuf_printf(out, "<function=%s>\n", name);
    } else {
        json_t *js = json_string(name);
        strbuf_puts(out, "{\"name\": ");
        jinja_tojson(js, -1, out);
        strbuf_puts(out, ", \"arguments\": ");
        json_decref(js);
    }
}

/* Prefill ids[s, n) into sq: one forward, or (with a hook) chunks of about
 * SESSION_PREFILL_CHUNK_S seconds, sized from the last chunk's rate and growing from 64
 * tokens at most twofold per chunk, the hook called between them. Logits of the last prompt token go to `logits`. *go = false: the hook
 * stopped it (the sequence is then part-way; the caller banks nothing). *done: the tokens
 * computed so far (n - s when it ran to the end). */
static int prefill(struct engine *e, struct seq *sq, const int32_t *ids, int64_t s, int64_t n,
                   struct engine_capture *caps, int n_caps, const struct session_opts *o, void *ctx, float *logits,
                   bool *go, int64_t *done, struct hs_err *err)
{
    *done = 0;
    if (!o->on_prefill) {
        int64_t last = n - s - 1;
        int rc = engine_forward(e, sq, ids + s, n - s, caps, n_caps, &last, 1, logits, err);
        if (rc == HS_OK) *done = n - s;
        return rc;
    }
    int64_t at = s, chunk = 64;
    while (at < n) {
        int64_t k = HS_MIN(chunk, n - at);
        bool final = at + k == n;
        int64_t last = k - 1;
        double t = sys_time_sec();
        int rc = engine_forward(e, sq, ids + at, k, caps, n_caps, final ? &last : NULL, final ? 1 : 0,
                                final ? logits : NULL, err);
        if (rc != HS_OK) return rc;
        at += k;
        *done = at - s;
        if (final) break;
        /* the next chunk: what the last one's rate does in the target time, but at most
         * twice the last (a token costs more the further it is: attention) */
        double dt = sys_time_sec() - t;
        double rate = dt > 1e-6 ? (double)k / dt : 1e9;
        chunk = HS_MAX((int64_t)16, HS_MIN(2 * k, (int64_t)(rate * SESSION_PREFILL_CHUNK_S)));
        if (!o->on_prefill(ctx, at, n)) { *go = false; break; }
    }
    return HS_OK;
}

/* Hand a token's text on, even none (so the caller can stop within one token); false = the
 * caller wants to stop. */
static bool emit_text(struct strbuf *piece, struct strbuf *all, session_text_fn on_text, void *ctx)
{
    if (piece->len) strbuf_append(all, piece->buf, piece->len);
    bool go = on_text ? on_text(ctx, piece->len ? piece->buf : "", piece->len) : true;
    piece->len = 0;
    return go;
}

int session_run(struct engine *e, const struct model_text *mt, struct bank *bank, enum api_kind kind,
                const json_t *body, const struct session_opts *o, session_text_fn on_text, void *ctx,
                struct session_report *out, struct hs_err *err)
{
    memset(out, 0, sizeof(*out));
    double t0 = sys_time_sec();
    if (!mt->tmpl) return hs_err_set(err, HS_ERR_UNSUPPORTED, "the model has no chat template");
    struct chat_request cr;
    int rc = kind == API_KIND_ANTHROPIC_MESSAGES   ? chat_from_anthropic(body, &cr, err)
             : kind == API_KIND_OPENAI_RESPONSES ? chat_from_responses(body, &cr, err)
                                                 : chat_from_openai(body, &cr, err);
    if (rc != HS_OK) return rc;
    struct strbuf prompt, forced;
    strbuf_init(&prompt);
    strbuf_init(&forced);
    rc = chat_template_render(mt->tmpl, &cr, &prompt, err);
    static const char open_think[] = "<think>\n";
    const size_t k_think = sizeof(open_think) - 1;
    const bool thinking = rc == HS_OK && prompt.len >= k_think &&
                          !memcmp(prompt.buf + prompt.len - k_think, open_think, k_think);
    const bool force_call = cr.tool_choice == CHAT_TOOL_REQUIRED || cr.tool_choice == CHAT_TOOL_NAMED;
    if (rc == HS_OK && force_call) {
        forced_call_text(mt, thinking, cr.tool_choice == CHAT_TOOL_NAMED ? cr.tool_name : NULL, &forced);
        strbuf_append(&prompt, forced.buf, forced.len);
    }
    /* stop strings match only in answer text (parse.c's chat_stop); a forced call starts
     * inside the call */
    struct chat_stop *stopper = rc == HS_OK ? chat_stop_new(cr.stop, cr.tool_choice == CHAT_TOOL_NONE,
                                                             force_call ? CHAT_STOP_IN_CALL
                                                             : thinking ? CHAT_STOP_IN_REASONING
                                                                        : CHAT_STOP_IN_TEXT)
                                            : NULL;
    json_t *stop_list = json_incref(cr.stop);
    chat_request_free(&cr);
    struct tokenizer_ids ids = { 0 }, user = { 0 };
    if (rc == HS_OK) rc = tokenizer_encode(mt->tok, prompt.buf ? prompt.buf : "", prompt.len, 0, &ids, err);
    if (rc == HS_OK) rc = tokenizer_encode(mt->tok, "user", 4, 0, &user, err);
    strbuf_free(&prompt);
    if (rc == HS_OK && ids.n == 0) rc = hs_err_set(err, HS_ERR_INVALID, "the request renders to an empty prompt");
    if (rc == HS_OK && o->n_ctx > 0 && (int64_t)ids.n >= o->n_ctx) {
        char msg[HS_ERR_MSG_MAX];
        api_context_error(kind, (int64_t)ids.n, o->n_ctx, msg, sizeof msg);
        rc = hs_err_set(err, API_ERR_CONTEXT, "%s", msg);
    }
    if (rc != HS_OK) {
        tokenizer_ids_free(&ids);
        tokenizer_ids_free(&user);
        chat_stop_free(stopper);
        json_decref(stop_list);
        strbuf_free(&forced);
        return rc;
    }
    if (forced.len) out->forced_text = hs_strndup(forced.buf, forced.len);
    const int64_t n = (int64_t)ids.n;
    int64_t max_tokens = o->max_tokens > 0 ? o->max_tokens : body_max_tokens(body);
    if (max_tokens <= 0) max_tokens = SESSION_DEFAULT_MAX_TOKENS;
    if (o->n_ctx > 0 && max_tokens > o->n_ctx - n) max_tokens = o->n_ctx - n;
    out->prompt_tokens = n;
    out->head_tokens = chat_head_length(ids.v, n, mt->im_start_id, mt->system_ids, mt->n_system_ids);
    out->user_start = last_turn(ids.v, n, mt->im_start_id, user.v, user.n);
    out->genprompt_start = last_turn(ids.v, n, mt->im_start_id, NULL, 0);
    tokenizer_ids_free(&user);

    const int64_t V = model_hparams(engine_model(e))->n_vocab;
    const uint64_t fp = engine_fingerprint(e);
    uint64_t dfp = 0; /* the disk tier's key space (invariant 2) */
    struct bank_disk *disk = o->disk;
    struct hs_err ferr;
    hs_err_clear(&ferr);
    if (bank && model_files_check(engine_model(e), &ferr) != HS_OK) {
        bank = NULL;
        disk = NULL;
        out->bank_off = "model_changed";
    }
    if (disk && !engine_fingerprint_persistent(e, &dfp)) {
        disk = NULL;
        out->bank_off = "model_identity_unknown";
    }
    const uint64_t row_bytes = engine_kv_row_bytes(e), snap_bytes = engine_snapshot_bytes(e);
    struct seq *sq = seq_new(e, n + max_tokens + 1);
    struct sampler *smp = sampler_new(&o->sampling, V);
    float *logits = hs_malloc((size_t)V * sizeof(float));
    int32_t *gen = hs_malloc((size_t)max_tokens * sizeof(int32_t));
    struct engine_capture caps[BANK_PLAN_MAX];
    struct bank_plan_pos plan[BANK_PLAN_MAX];
    enum bank_snap_kind cap_kind[BANK_PLAN_MAX];
    int n_caps = 0;
    out->cache_source = "none";
    out->restore_reason = "no_bank";
    out->stop_reason = "length";
    if (!smp) rc = hs_err_set(err, HS_ERR_INVALID, "invalid sampling options");

    /* lookup and restore: RAM first, then the disk tier for anything deeper */
    double t_pre = sys_time_sec();
    int64_t s = 0;
    if (rc == HS_OK && bank) rc = bank_space_add(bank, fp, (size_t)row_bytes, (size_t)snap_bytes, err);
    if (rc == HS_OK && bank) {
        struct bank_hit hit;
        bank_lookup(bank, fp, ids.v, n, &hit);
        out->match_len = hit.match_len;
        out->restore_reason = bank_reason_name(hit.reason);
        struct bank_disk_hit dh = { 0 };
        if (disk) {
            uint64_t bad0 = disk_bad_count(disk);
            bank_disk_lookup(disk, dfp, (size_t)row_bytes, (size_t)snap_bytes, ids.v, n,
                             hit.restore_pos, n - 1, &dh);
            out->disk_discarded = (int64_t)(disk_bad_count(disk) - bad0);
        }
        if (dh.pos > hit.restore_pos) {
            bank_hit_release(bank, &hit);
            rc = seq_restore_parts(sq, dh.pos, dh.kv, dh.snapshot, err);
            if (rc == HS_OK) {
                s = dh.pos;
                out->cache_source = "disk";
                disk_promote(bank, fp, (size_t)row_bytes, &dh);
                int64_t L = HS_MAX(HS_MAX(out->match_len, dh.pos), bank_match_len(bank, fp, ids.v, n));
                out->match_len = L;
                out->restore_reason = bank_reason_name(s == n - 1 ? BANK_REASON_FULL
                                                       : s == L  ? BANK_REASON_DIVERGED
                                                                 : BANK_REASON_NO_SNAPSHOT);
            }
        } else if (hit.restore_pos > 0) {
            void *kv = hs_malloc((size_t)(hit.restore_pos * (int64_t)row_bytes));
            void *snap = hs_malloc((size_t)HS_MAX(snap_bytes, 1));
            bank_copy_kv(bank, &hit, kv);
            bank_copy_snapshot(bank, &hit, snap);
            bank_hit_release(bank, &hit);
            rc = seq_restore_parts(sq, hit.restore_pos, kv, snap, err);
            if (rc == HS_OK) {
                s = hit.restore_pos;
                out->cache_source = "ram";
            }
            hs_free(kv);
            hs_free(snap);
        }
        bank_disk_hit_free(&dh);
    }
    out->cached_tokens = s;

    /* the caller learns the numbers before the prefill, and may stop here */
    bool go = true;
    if (rc == HS_OK && o->on_start) {
        struct session_start st = { .prompt_tokens = n, .cached_tokens = s, .thinking = thinking,
                                    .forced_text = forced.len ? forced.buf : "", .forced_len = forced.len };
        go = o->on_start(ctx, &st);
        if (!go) out->stop_reason = "cancelled";
    }

    /* snapshot plan: positions the prefill passes (s, n] */
    if (rc == HS_OK && go && bank) {
        struct bank_plan_in in = { .ids = ids.v, .n = n, .head_len = out->head_tokens,
                                   .user_start = out->user_start, .genprompt_start = out->genprompt_start };
        int np = bank_plan(bank, fp, NULL, &in, plan, NULL);
        for (int i = 0; i < np; i++) {
            if (plan[i].pos <= s || plan[i].pos > n) continue;
            caps[n_caps] = (struct engine_capture){ .pos = plan[i].pos, .buf = hs_malloc((size_t)HS_MAX(snap_bytes, 1)) };
            cap_kind[n_caps++] = plan[i].kind;
        }
    }
    out->n_captures = n_caps;

    /* prefill */
    bool prefilled = false;
    if (rc == HS_OK && go) {
        for (int64_t i = 0; i < n; i++) sampler_accept(smp, ids.v[i]);
        rc = prefill(e, sq, ids.v, s, n, caps, n_caps, o, ctx, logits, &go, &out->prefilled_tokens, err);
        prefilled = go;
        if (!go) out->stop_reason = "cancelled";
        out->prefill_ms = (sys_time_sec() - t_pre) * 1e3;
        if (rc == HS_OK && go) sha256_hex(logits, (size_t)V * sizeof(float), out->first_logits_sha256);
    }

    /* generate */
    struct strbuf text, piece, raw;
    strbuf_init(&text);
    strbuf_init(&piece);
    strbuf_init(&raw);
    int stop_hit = CHAT_STOP_NONE;
    struct tokenizer_stream ts;
    tokenizer_stream_init(&ts, mt->tok, 0);
    int64_t n_gen = 0, n_script = 0;
    int32_t *script = NULL; /* TEST ONLY (test_emit.c): scripted ids instead of sampling */
    while (rc == HS_OK && go && n_gen < max_tokens) {
        if (n_gen == 0) script = test_emit_take(&n_script);
        int32_t tok = n_gen < n_script ? script[n_gen] : sampler_sample(smp, logits);
        gen[n_gen++] = tok;
        sampler_accept(smp, tok);
        if (n_gen == 1) out->ttft_ms = (sys_time_sec() - t0) * 1e3;
        bool stop = false;
        for (int k = 0; k < mt->n_stop_ids; k++) stop |= tok == mt->stop_ids[k];
        if (stop && !o->ignore_eos) {
            out->stop_reason = "stop";
            break;
        }
        /* an id with no piece (a padding row of the vocabulary) has no text */
        size_t plen;
        if (tokenizer_piece(mt->tok, tok, &plen))
            rc = tokenizer_stream_push(&ts, tok, stopper ? &raw : &piece, err);
        if (stopper && raw.len) {
            stop_hit = chat_stop_feed(stopper, raw.buf, raw.len, &piece);
            strbuf_reset(&raw);
        }
        go = emit_text(&piece, &text, on_text, ctx);
        if (!go) out->stop_reason = "cancelled";
        if (stop_hit != CHAT_STOP_NONE) break;
        if (!go || rc != HS_OK || n_gen == max_tokens) break;
        int64_t row = 0;
        rc = engine_forward(e, sq, &tok, 1, NULL, 0, &row, 1, logits, err);
    }
    if (stop_hit == CHAT_STOP_NONE) {
        tokenizer_stream_flush(&ts, stopper ? &raw : &piece);
        if (stopper && go && rc == HS_OK) {
            stop_hit = chat_stop_feed(stopper, raw.buf, raw.len, &piece);
            if (stop_hit == CHAT_STOP_NONE) stop_hit = chat_stop_finish(stopper, &piece);
        }
        if (piece.len && go) emit_text(&piece, &text, on_text, ctx);
    }
    if (go && stop_hit >= 0) {
        out->stop_reason = "stop_sequence";
        out->stop_sequence = hs_strdup(json_string_value(json_array_get(stop_list, (size_t)stop_hit)));
    } else if (go && stop_hit == CHAT_STOP_TOOL_CALL) {
        out->stop_reason = "stop";
    }
    hs_free(script);
    chat_stop_free(stopper);
    json_decref(stop_list);
    strbuf_free(&raw);
    strbuf_free(&forced);

    /* feed the last token so the sequence sits at the end of the path, then bank it */
    if (rc == HS_OK && n_gen > 0) rc = engine_forward(e, sq, &gen[n_gen - 1], 1, NULL, 0, NULL, 0, NULL, err);
    if (rc == HS_OK && prefilled && bank && model_files_check(engine_model(e), &ferr) != HS_OK) {
        bank = NULL; /* changed during the request (invariant 2a) */
        out->bank_off = "model_changed";
    }
    if (rc == HS_OK && prefilled && bank) {
        int64_t n_total = n + n_gen;
        int32_t *path = hs_malloc((size_t)n_total * sizeof(int32_t));
        memcpy(path, ids.v, (size_t)n * sizeof(int32_t));
        memcpy(path + n, gen, (size_t)n_gen * sizeof(int32_t));
        int64_t kv_from = bank_match_len(bank, fp, path, n_total);
        /* the disk tier wants every entry whole (rows [0, pos)), so then read them all */
        int64_t read_from = disk ? 0 : kv_from;
        void *kv = hs_malloc((size_t)((n_total - read_from) * (int64_t)row_bytes));
        rc = seq_kv_read(sq, read_from, n_total, kv) == HS_OK
                 ? HS_OK
                 : hs_err_set(err, HS_ERR_INVALID, "session: KV rows [%lld, %lld) not in the sequence",
                              (long long)read_from, (long long)n_total);
        struct bank_snap_in snaps[BANK_PLAN_MAX + 1];
        int ns = 0;
        for (int i = 0; i < n_caps; i++)
            if (caps[i].filled) snaps[ns++] = (struct bank_snap_in){ caps[i].pos, cap_kind[i], caps[i].buf };
        void *end = hs_malloc((size_t)HS_MAX(snap_bytes, 1));
        seq_snapshot(sq, end);
        if (ns == 0 || snaps[ns - 1].pos < n_total) snaps[ns++] = (struct bank_snap_in){ n_total, BANK_SNAP_END, end };
        if (rc == HS_OK)
            rc = bank_insert(bank, fp, path, n_total, kv_from, (const uint8_t *)kv + (kv_from - read_from) * (int64_t)row_bytes,
                             snaps, ns, err);
        /* the answer stands whatever happens to the bank: a failed insert only loses reuse */
        if (rc != HS_OK) {
            hs_log_write(HS_LOG_WARN, "session: not banked: %s", err->msg);
            rc = HS_OK;
        } else {
            out->banked = true;
            /* the same snapshots go to disk: put copies and queues, the writer thread does
             * the I/O; a refused put (queue full, tier off, too big) only loses reuse later */
            for (int i = 0; disk && i < ns; i++) {
                enum bank_disk_put_result pr = bank_disk_put(disk, dfp, (size_t)row_bytes, (size_t)snap_bytes, path,
                                                             snaps[i].pos, kv, snaps[i].bytes, snaps[i].kind);
                if (pr == BANK_DISK_QUEUED || pr == BANK_DISK_DUPLICATE) out->n_disk_puts++;
            }
        }
        hs_free(end);
        hs_free(kv);
        hs_free(path);
    }
    out->total_ms = (sys_time_sec() - t0) * 1e3;
    strbuf_free(&piece);
    for (int i = 0; i < n_caps; i++) hs_free(caps[i].buf);
    hs_free(logits);
    sampler_free(smp);
    seq_free(sq);
    tokenizer_ids_free(&ids);
    if (rc != HS_OK) {
        hs_free(gen);
        strbuf_free(&text);
        session_report_free(out);
        return rc;
    }
    out->output_ids = gen;
    out->n_output = n_gen;
    out->text = strbuf_detach(&text, &out->text_len);
    return HS_OK;
}

void session_report_free(struct session_report *r)
{
    if (!r) return;
    hs_free(r->output_ids);
    hs_free(r->text);
    hs_free(r->stop_sequence);
    hs_free(r->forced_text);
    memset(r, 0, sizeof(*r));
}

void session_report_json(const struct session_report *r, struct strbuf *out)
{
    struct jsonw w;
    jsonw_init(&w, out, 0);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "prompt_tokens"); jsonw_int(&w, r->prompt_tokens);
    jsonw_key(&w, "cached_tokens"); jsonw_int(&w, r->cached_tokens);
    jsonw_key(&w, "cache_source"); jsonw_str(&w, r->cache_source ? r->cache_source : "none");
    jsonw_key(&w, "head_tokens"); jsonw_int(&w, r->head_tokens);
    jsonw_key(&w, "user_start"); jsonw_int(&w, r->user_start);
    jsonw_key(&w, "genprompt_start"); jsonw_int(&w, r->genprompt_start);
    jsonw_key(&w, "match_len"); jsonw_int(&w, r->match_len);
    jsonw_key(&w, "restore_reason"); jsonw_str(&w, r->restore_reason ? r->restore_reason : "no_bank");
    jsonw_key(&w, "captures"); jsonw_int(&w, r->n_captures);
    jsonw_key(&w, "banked"); jsonw_bool(&w, r->banked);
    jsonw_key(&w, "stop_reason"); jsonw_str(&w, r->stop_reason ? r->stop_reason : "length");
    if (r->stop_sequence) { jsonw_key(&w, "stop_sequence"); jsonw_str(&w, r->stop_sequence); }
    if (r->forced_text) { jsonw_key(&w, "forced_text"); jsonw_str(&w, r->forced_text); }
    if (r->bank_off) { jsonw_key(&w, "bank_off"); jsonw_str(&w, r->bank_off); }
    jsonw_key(&w, "output_ids");
    jsonw_arr_begin(&w);
    for (int64_t i = 0; i < r->n_output; i++) jsonw_int(&w, r->output_ids[i]);
    jsonw_arr_end(&w);
    jsonw_key(&w, "text"); jsonw_strn(&w, r->text ? r->text : "", r->text_len);
    jsonw_key(&w, "first_logits_sha256"); jsonw_str(&w, r->first_logits_sha256);
    jsonw_key(&w, "prefill_ms"); jsonw_double(&w, r->prefill_ms);
    jsonw_key(&w, "ttft_ms"); jsonw_double(&w, r->ttft_ms);
    jsonw_key(&w, "total_ms"); jsonw_double(&w, r->total_ms);
    jsonw_key(&w, "disk_discarded"); jsonw_int(&w, r->disk_discarded);
    jsonw_key(&w, "disk_puts"); jsonw_int(&w, r->n_disk_puts);
    jsonw_obj_end(&w);
}
