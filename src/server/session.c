/*
 * session.c — the request path: one request from its parsed form (api_request) to
 * generated tokens, with the session bank around the prefill, as named steps. A step does
 * one small thing and returns; session_run drives the steps for one request with
 * callbacks (`headstart replay`, the HTTP scheduler), and a scheduler that runs many
 * requests can interleave the steps of several.
 *
 *   session_new       prompt:   request ─▶ render (+ a forced call's start) ─▶ ids
 *                               ─▶ head / last user turn / generation prompt ─▶ limits
 *   session_restore   restore:  model files checked ─▶ bank_restore (RAM, then disk, then
 *                               remote for a deeper point; a hit is promoted) ─▶
 *                               seq_restore_parts
 *   session_prefill   prefill:  (first call) bank_plan ─▶ engine_forward(ids[at, at + k))
 *                               with captures at planned positions; the last chunk gives
 *                               the first logits
 *   session_generate  generate: feed the previous token ─▶ sample ─▶ text through the
 *                               stop-string matcher
 *   session_finish    bank:     feed the last token ─▶ bank_store(prompt + generated,
 *                               captured snapshots + one at the end; RAM, then disk puts;
 *                               only the KV rows neither tier holds leave the sequence)
 *
 *   state:  PROMPT ─restore─▶ RESTORED ─prefill*─▶ PREFILLED ─generate*─▶ GENERATED ─finish─▶ DONE
 *              cancel from any state before DONE ─▶ CANCELLED ─finish─▶ DONE
 *
 * Invariants:
 *   1. The bank is only read through copies (bank_restore) into the request's own
 *      sequence; nothing of the bank stays pinned after the restore step. A disk or
 *      remote hit is promoted into RAM after the first token is out (the next generate
 *      step, or finish), from the hit's own buffer (bank_restore_lazy).
 *   2. Everything restored was made under this engine's fingerprint (the key space): the
 *      process fingerprint for the RAM bank, the persistent one (the model identity,
 *      engine.h) for the disk and remote tiers, skipped while the engine has none (the
 *      server is still hashing the model: report bank_off model_identity_unknown).
 *   2a. Before the restore and again before the store, model_files_check: a model file
 *      changed in place since load means the weights computing now are not the ones the
 *      bank's state was made with (nor what the identity says): no restore, no store, in
 *      either tier (bank_off model_changed); the answer itself is still computed.
 *   3. A restore changes no logits: with or without the bank, the same request gives the
 *      same first logits row and the same tokens (the engine's exactness, whatever the
 *      prefill's chunk sizes).
 *   4. The sequence fed to the bank after generation is at position prompt + generated
 *      (the last sampled token is fed once more without logits), so the END snapshot and
 *      the KV rows describe exactly the stored path. The engine calls are the same
 *      whether a token's text is handed on before or after the next step.
 *   5. The disk tier is consulted only for a point deeper than RAM's, the remote tier only
 *      for one deeper than both, and only with a RAM bank (bank_restore's invariants).
 *   6. A cancel stops within one generated token or one prefill chunk; a cancel before
 *      the prefill completed leaves the bank untouched, one during generation banks the
 *      prompt and what was generated (the path is as valid as a finished one). The report
 *      says where it stopped: prefilled_tokens below prompt - cached is a prefill cut
 *      part-way.
 *   7. Stop strings (the request's `stop` / `stop_sequences`) are matched on the generated
 *      text by chat_stop (parse.c: answer text only, never inside <think> or a tool call);
 *      text that may still become one is held back, so the caller never sees any part of a
 *      matched string. tool_choice none ends generation at a `<tool_call>` in text the
 *      same way (stop reason "stop").
 *   8. tool_choice required / named: the generation prompt is extended with the start of a
 *      call (chat_forced_call_text, in the template's own dialect; an open <think> is
 *      closed empty first) so the model can only continue a call; that text is the
 *      answer's start (session_start.forced_text, the report's forced_text) and what the
 *      model writes must complete it — best effort: a call the model does not finish comes
 *      out as text, like any malformed call.
 *   9. TEST ONLY: with serve's HEADSTART_TEST_EMIT on (test_emit.c), the generated ids are
 *      the next scripted text's instead of sampled ones; everything else is unchanged.
 */
#include "server/server.h"
#include "server/server_int.h"
#include "sys/sys.h"

#include <string.h>

enum session_work_kind { WORK_NONE = 0, WORK_PREFILL, WORK_DECODE, WORK_FEED_LAST };

enum session_state {
    SESSION_PROMPT = 0,
    SESSION_RESTORED,
    SESSION_PREFILLED,
    SESSION_GENERATED,
    SESSION_CANCELLED,
    SESSION_DONE,
};

struct session {
    struct engine *e;
    const struct model_text *mt;
    struct bank *bank;            /* NULL: no bank, or turned off (bank_off) */
    struct bank_disk *disk;       /* NULL: no disk tier for this request */
    struct bank_remote *remote;   /* NULL: no remote tier for this request */
    struct session_opts o;
    enum session_state state;
    bool prefill_began;           /* the prefill step ran at least once */
    bool prefilled;               /* the whole prompt is in (the bank may store it) */
    struct bank_keys keys;
    int64_t V;

    struct tokenizer_ids ids;     /* the prompt */
    int64_t n;                    /* prompt tokens */
    int64_t at;                   /* prompt tokens in the sequence (restored + computed) */
    int64_t max_tokens;           /* the output cap */
    struct strbuf forced;         /* a forced tool call's start ("" none) */
    struct session_start start;
    struct seq *sq;
    struct sampler *smp;
    float *logits;                /* [V]: the last token's row */

    struct engine_capture caps[BANK_PLAN_MAX];
    enum bank_snap_kind cap_kind[BANK_PLAN_MAX];
    int n_caps;
    bool head_stored;             /* session_store_head banked the head early */
    struct bank_restored br;      /* the restore's result while a disk or remote hit waits
                                   * for its promotion into RAM (after the first token) */

    enum session_work_kind work;  /* what the last session_work asked the engine for */
    int64_t work_n;               /* its tokens */
    int64_t work_row;             /* its logits row (index into its tokens) */

    int32_t *gen;                 /* [max_tokens] generated ids */
    int64_t n_gen;
    bool pending;                 /* gen[n_gen - 1] is not fed yet */
    bool fed_last;                /* the last generated token was fed for the bank (finish) */
    int32_t *script;              /* TEST ONLY (test_emit.c): scripted ids instead of sampling */
    int64_t n_script;
    struct chat_stop *stopper;    /* NULL: nothing to match */
    const json_t *stop_list;      /* borrowed from the request */
    int stop_hit;                 /* CHAT_STOP_NONE, a stop string's index, CHAT_STOP_TOOL_CALL */
    struct tokenizer_stream ts;
    struct strbuf raw;            /* decoded text before the stop matcher */
    struct strbuf text;           /* every piece handed on */

    double t0, t_pre;
    struct session_report rep;
};

const char *session_stop_name(enum session_stop s)
{
    static const char *const names[SESSION_STOP_COUNT] = { "length", "stop", "stop_sequence", "cancelled" };
    return (unsigned)s < SESSION_STOP_COUNT ? names[s] : "length";
}

const char *session_bank_off_name(enum session_bank_off o)
{
    static const char *const names[SESSION_BANK_OFF_COUNT] = { NULL, "model_changed", "model_identity_unknown" };
    return (unsigned)o < SESSION_BANK_OFF_COUNT ? names[o] : NULL;
}

void session_sampling_defaults(struct api_sampling *out)
{
    struct sampler_opts so;
    sampler_opts_default(&so);
    *out = (struct api_sampling){ .temperature = so.temperature, .top_p = so.top_p, .top_k = so.top_k,
                                  .min_p = so.min_p, .presence_penalty = so.presence_penalty,
                                  .frequency_penalty = so.frequency_penalty };
}

void session_sampling_opts(const struct api_sampling *a, uint64_t seed, struct sampler_opts *so)
{
    sampler_opts_default(so);
    so->temperature = (float)a->temperature;
    so->top_p = (float)a->top_p;
    so->top_k = (int)a->top_k;
    so->min_p = (float)a->min_p;
    so->presence_penalty = (float)a->presence_penalty;
    so->frequency_penalty = (float)a->frequency_penalty;
    so->seed = seed;
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

/* Render the request into s->ids (a forced call's start appended) and set up the stop
 * matcher; sets s->start.thinking. */
static int prompt_ids(struct session *s, const struct api_request *rq, struct hs_err *err)
{
    const struct model_text *mt = s->mt;
    const struct chat_request *cr = &rq->chat;
    struct strbuf prompt;
    strbuf_init(&prompt);
    int rc = chat_template_render(mt->tmpl, cr, &prompt, err);
    static const char open_think[] = "<think>\n";
    const size_t k_think = sizeof(open_think) - 1;
    const bool thinking = rc == HS_OK && prompt.len >= k_think &&
                          !memcmp(prompt.buf + prompt.len - k_think, open_think, k_think);
    const bool force_call = cr->tool_choice == CHAT_TOOL_REQUIRED || cr->tool_choice == CHAT_TOOL_NAMED;
    if (rc == HS_OK && force_call) {
        chat_forced_call_text(mt->tmpl, thinking, cr->tool_choice == CHAT_TOOL_NAMED ? cr->tool_name : NULL, &s->forced);
        strbuf_append(&prompt, s->forced.buf, s->forced.len);
    }
    /* stop strings match only in answer text (parse.c's chat_stop); a forced call starts
     * inside the call */
    if (rc == HS_OK)
        s->stopper = chat_stop_new(cr->stop, cr->tool_choice == CHAT_TOOL_NONE,
                                   force_call ? CHAT_STOP_IN_CALL : thinking ? CHAT_STOP_IN_REASONING : CHAT_STOP_IN_TEXT);
    s->stop_list = cr->stop;
    s->start.thinking = thinking;
    if (rc == HS_OK) rc = tokenizer_encode(mt->tok, prompt.buf ? prompt.buf : "", prompt.len, 0, &s->ids, err);
    strbuf_free(&prompt);
    return rc;
}

static struct session *session_alloc(struct engine *e, const struct model_text *mt, struct bank *bank,
                                     const struct session_opts *o)
{
    struct session *s = hs_calloc(1, sizeof(*s));
    s->t0 = sys_time_sec();
    s->e = e;
    s->mt = mt;
    s->bank = bank;
    s->disk = o->disk;
    s->remote = o->remote;
    s->o = *o;
    s->stop_hit = CHAT_STOP_NONE;
    strbuf_init(&s->forced);
    strbuf_init(&s->raw);
    strbuf_init(&s->text);
    return s;
}

/* Everything after the prompt ids: the output cap (o->max_tokens, else the request's, else
 * the default; within the context), the anchors, the sequence, the sampler. */
static int session_setup(struct session *s, int64_t req_max_tokens, struct hs_err *err)
{
    const struct model_text *mt = s->mt;
    const struct session_opts *o = &s->o;
    struct session_report *r = &s->rep;
    const int64_t n = s->n = (int64_t)s->ids.n;
    if (s->forced.len) r->forced_text = hs_strndup(s->forced.buf, s->forced.len);
    int64_t max_tokens = o->max_tokens > 0 ? o->max_tokens : req_max_tokens;
    if (max_tokens <= 0) max_tokens = SESSION_DEFAULT_MAX_TOKENS;
    if (o->n_ctx > 0 && max_tokens > o->n_ctx - n) max_tokens = o->n_ctx - n;
    s->max_tokens = max_tokens;
    r->prompt_tokens = n;
    r->user_start = r->genprompt_start = -1;
    if (mt) {
        struct tokenizer_ids user = { 0 };
        int rc = tokenizer_encode(mt->tok, "user", 4, 0, &user, err);
        if (rc != HS_OK) return rc;
        r->head_tokens = chat_head_length(s->ids.v, n, mt->im_start_id, mt->system_ids, mt->n_system_ids);
        r->user_start = last_turn(s->ids.v, n, mt->im_start_id, user.v, user.n);
        r->genprompt_start = last_turn(s->ids.v, n, mt->im_start_id, NULL, 0);
        tokenizer_ids_free(&user);
        tokenizer_stream_init(&s->ts, mt->tok, o->text_flags);
    }
    s->V = model_hparams(engine_model(s->e))->n_vocab;
    s->keys = (struct bank_keys){ .fp = engine_fingerprint(s->e),
                                  .kv_row_bytes = (size_t)engine_kv_row_bytes(s->e),
                                  .snapshot_bytes = (size_t)engine_snapshot_bytes(s->e) };
    s->sq = seq_new(s->e, n + max_tokens + 1);
    s->smp = sampler_new(&o->sampling, s->V);
    s->logits = hs_malloc((size_t)s->V * sizeof(float));
    s->gen = hs_malloc((size_t)max_tokens * sizeof(int32_t));
    r->stop_reason = SESSION_STOP_LENGTH;
    if (!s->smp) return hs_err_set(err, HS_ERR_INVALID, "invalid sampling options");
    s->start.prompt_tokens = n;
    s->start.forced_text = s->forced.len ? s->forced.buf : "";
    s->start.forced_len = s->forced.len;
    return HS_OK;
}

int session_new(struct engine *e, const struct model_text *mt, struct bank *bank, const struct api_request *rq,
                const struct session_opts *o, struct session **out, struct hs_err *err)
{
    *out = NULL;
    if (!mt->tmpl) return hs_err_set(err, HS_ERR_UNSUPPORTED, "the model has no chat template");
    struct session *s = session_alloc(e, mt, bank, o);
    int rc = prompt_ids(s, rq, err);
    if (rc == HS_OK && s->ids.n == 0) rc = hs_err_set(err, HS_ERR_INVALID, "the request renders to an empty prompt");
    if (rc == HS_OK && o->n_ctx > 0 && (int64_t)s->ids.n >= o->n_ctx) {
        char msg[HS_ERR_MSG_MAX];
        api_context_error(rq->kind, (int64_t)s->ids.n, o->n_ctx, msg, sizeof msg);
        rc = hs_err_set(err, API_ERR_CONTEXT, "%s", msg);
    }
    if (rc == HS_OK) rc = session_setup(s, rq->max_tokens, err);
    if (rc != HS_OK) {
        session_free(s);
        return rc;
    }
    *out = s;
    return HS_OK;
}

int session_new_ids(struct engine *e, const struct model_text *mt, struct bank *bank, const int32_t *ids, int64_t n,
                    const struct session_opts *o, struct session **out, struct hs_err *err)
{
    *out = NULL;
    if (n <= 0) return hs_err_set(err, HS_ERR_INVALID, "the prompt is empty");
    if (o->n_ctx > 0 && n >= o->n_ctx)
        return hs_err_set(err, HS_ERR_LIMIT, "the prompt has %lld tokens; the context holds %lld", (long long)n,
                          (long long)o->n_ctx);
    struct session *s = session_alloc(e, mt, bank, o);
    s->ids.v = hs_malloc((size_t)n * sizeof(int32_t));
    memcpy(s->ids.v, ids, (size_t)n * sizeof(int32_t));
    s->ids.n = (size_t)n;
    int rc = session_setup(s, 0, err);
    if (rc != HS_OK) {
        session_free(s);
        return rc;
    }
    *out = s;
    return HS_OK;
}

/* The promotion session_restore left: after the first token was handed on (the next
 * generate step) or at finish, so the RAM copy is off the time to first token. */
static void promote_restored(struct session *s)
{
    if (s->bank) bank_restored_promote(s->bank, &s->keys, &s->br);
    bank_restored_free(&s->br);
}

int session_restore(struct session *s, struct hs_err *err)
{
    struct session_report *r = &s->rep;
    struct hs_err ferr;
    hs_err_clear(&ferr);
    if (s->bank && model_files_check(engine_model(s->e), &ferr) != HS_OK) {
        s->bank = NULL;
        s->disk = NULL;
        s->remote = NULL;
        r->bank_off = SESSION_BANK_OFF_MODEL_CHANGED;
    }
    if (!s->bank) s->disk = NULL, s->remote = NULL;
    if ((s->disk || s->remote) && !engine_fingerprint_persistent(s->e, &s->keys.disk_fp)) {
        s->disk = NULL;
        s->remote = NULL;
        r->bank_off = SESSION_BANK_OFF_IDENTITY_UNKNOWN;
    }
    s->t_pre = sys_time_sec();
    int rc = HS_OK;
    if (s->bank) {
        struct bank_restored br;
        /* the promotion of a disk or remote hit into RAM waits for the first token
         * (promote_restored) */
        rc = bank_restore_lazy(s->bank, s->disk, s->remote, &s->keys, s->ids.v, s->n, &br, err);
        if (rc == HS_OK) {
            r->bank_used = true;
            r->match_len = br.match_len;
            r->restore_reason = br.reason;
            r->disk_discarded = br.disk_discarded;
            r->remote_discarded = br.remote_discarded;
            if (br.pos > 0) rc = seq_restore_parts(s->sq, br.pos, br.kv, br.snapshot, err);
            if (rc == HS_OK && br.pos > 0) {
                s->at = br.pos;
                r->cache_source = br.source;
            }
        }
        if (rc == HS_OK && br.promote_) s->br = br; /* its hit's buffer stays until then */
        else bank_restored_free(&br);
    }
    r->cached_tokens = s->at;
    s->start.cached_tokens = s->at;
    s->state = SESSION_RESTORED;
    return rc;
}

const struct session_start *session_start_info(const struct session *s)
{
    return &s->start;
}

/* The snapshot plan: positions the prefill passes (at, n]. */
static void plan_captures(struct session *s)
{
    struct session_report *r = &s->rep;
    struct bank_plan_pos plan[BANK_PLAN_MAX];
    struct bank_plan_in in = { .ids = s->ids.v, .n = s->n, .head_len = r->head_tokens,
                               .user_start = r->user_start, .genprompt_start = r->genprompt_start };
    int np = bank_plan(s->bank, s->keys.fp, NULL, &in, plan, NULL);
    for (int i = 0; i < np; i++) {
        if (plan[i].pos <= s->at || plan[i].pos > s->n) continue;
        s->caps[s->n_caps] = (struct engine_capture){ .pos = plan[i].pos,
                                                      .buf = hs_malloc(HS_MAX(s->keys.snapshot_bytes, (size_t)1)) };
        s->cap_kind[s->n_caps++] = plan[i].kind;
    }
    r->n_captures = s->n_caps;
}

/* The first prefill step: the capture plan, and the prompt as the penalties' context. */
static void prefill_begin(struct session *s)
{
    if (s->prefill_began) return;
    s->prefill_began = true;
    if (s->bank) plan_captures(s);
    for (int64_t i = 0; i < s->n; i++) sampler_accept(s->smp, s->ids.v[i]);
}

/* The bank will store the path: the last generated token must be in the sequence first
 * (invariant 4). */
static bool feed_last_wanted(const struct session *s)
{
    return s->n_gen > 0 && s->prefilled && s->bank && !s->fed_last;
}

int64_t session_work(struct session *s, int64_t max_tokens, struct engine_item *it)
{
    memset(it, 0, sizeof(*it));
    s->work = WORK_NONE;
    if (s->state == SESSION_RESTORED) {
        prefill_begin(s);
        int64_t k = s->n - s->at;
        if (max_tokens > 0 && max_tokens < k) k = max_tokens;
        const bool final = s->at + k == s->n;
        s->work = WORK_PREFILL;
        s->work_n = k;
        s->work_row = k - 1;
        *it = (struct engine_item){ .s = s->sq, .tokens = s->ids.v + s->at, .n = k, .caps = s->caps,
                                    .n_caps = s->n_caps, .rows = final ? &s->work_row : NULL, .n_rows = final ? 1 : 0 };
        return k;
    }
    if (s->state == SESSION_PREFILLED && s->pending) {
        s->work = WORK_DECODE;
        s->work_n = 1;
        s->work_row = 0;
        *it = (struct engine_item){ .s = s->sq, .tokens = &s->gen[s->n_gen - 1], .n = 1, .rows = &s->work_row, .n_rows = 1 };
        return 1;
    }
    if (s->state == SESSION_GENERATED && feed_last_wanted(s)) {
        s->work = WORK_FEED_LAST;
        s->work_n = 1;
        *it = (struct engine_item){ .s = s->sq, .tokens = &s->gen[s->n_gen - 1], .n = 1 };
        return 1;
    }
    return 0;
}

void session_work_done(struct session *s, const float *row)
{
    struct session_report *r = &s->rep;
    if (row && s->work != WORK_NONE) memcpy(s->logits, row, (size_t)s->V * sizeof(float));
    if (s->work == WORK_PREFILL) {
        r->prefill_ms = (sys_time_sec() - s->t_pre) * 1e3;
        s->at += s->work_n;
        r->prefilled_tokens = s->at - r->cached_tokens;
        if (s->at == s->n) {
            s->prefilled = true;
            s->state = SESSION_PREFILLED;
            sys_sha256_hex(s->logits, (size_t)s->V * sizeof(float), r->first_logits_sha256);
        }
    } else if (s->work == WORK_DECODE) {
        s->pending = false;
    } else if (s->work == WORK_FEED_LAST) {
        s->fed_last = true;
    }
    s->work = WORK_NONE;
}

/* One session_work item through engine_forward, its row straight into s->logits. */
static int work_run(struct session *s, int64_t max_tokens, struct hs_err *err)
{
    struct engine_item it;
    if (session_work(s, max_tokens, &it) == 0) return HS_OK;
    int rc = engine_forward(s->e, it.s, it.tokens, it.n, it.caps, it.n_caps, it.rows, it.n_rows,
                            it.n_rows ? s->logits : NULL, err);
    if (rc != HS_OK) {
        s->work = WORK_NONE;
        return rc;
    }
    session_work_done(s, NULL);
    return HS_OK;
}

int session_prefill(struct session *s, int64_t max_tokens, bool *done, struct hs_err *err)
{
    *done = s->prefilled;
    if (s->state != SESSION_RESTORED) return HS_OK;
    int rc = work_run(s, max_tokens, err);
    *done = s->prefilled;
    return rc;
}

bool session_ready_to_sample(const struct session *s)
{
    return s->state == SESSION_PREFILLED && !s->pending;
}

bool session_head_pending(const struct session *s, int64_t *head)
{
    *head = s->rep.head_tokens;
    if (s->state == SESSION_DONE || s->state == SESSION_CANCELLED || s->head_stored) return false;
    for (int i = 0; i < s->n_caps; i++)
        if (s->cap_kind[i] == BANK_SNAP_HEAD) return !s->caps[i].filled;
    /* before the first prefill step the plan is not made: a prompt computing its head from
     * scratch will capture it when the planner keeps a head anchor */
    return !s->prefill_began && s->bank && s->at < *head && *head > 0;
}

const int32_t *session_prompt_ids(const struct session *s) { return s->ids.v; }
bool session_prefill_done(const struct session *s) { return s->prefilled; }
bool session_generation_over(const struct session *s) { return s->state == SESSION_GENERATED; }
int64_t session_output_cap(const struct session *s) { return s->max_tokens; }
double session_started(const struct session *s) { return s->t0; }

int session_store_head(struct session *s, struct hs_err *err)
{
    int c = -1;
    for (int i = 0; i < s->n_caps; i++)
        if (s->cap_kind[i] == BANK_SNAP_HEAD && s->caps[i].filled) c = i;
    if (c < 0 || s->head_stored || !s->bank) return HS_OK;
    s->head_stored = true;
    struct hs_err ferr;
    hs_err_clear(&ferr);
    if (model_files_check(engine_model(s->e), &ferr) != HS_OK) return HS_OK; /* invariant 2a: session_finish says it */
    const int64_t pos = s->caps[c].pos;
    struct bank_snap_in snap = { pos, BANK_SNAP_HEAD, s->caps[c].buf };
    int64_t from = bank_store_rows_from(s->bank, s->disk, &s->keys, s->ids.v, pos, &snap, 1);
    void *kv = hs_malloc(HS_MAX((size_t)(pos - from) * s->keys.kv_row_bytes, (size_t)1));
    int rc = seq_kv_read(s->sq, from, pos, kv) == HS_OK
                 ? HS_OK
                 : hs_err_set(err, HS_ERR_INVALID, "session: KV rows [%lld, %lld) not in the sequence", (long long)from,
                              (long long)pos);
    int puts = 0;
    if (rc == HS_OK) rc = bank_store(s->bank, s->disk, &s->keys, s->ids.v, pos, from, kv, &snap, 1, &puts, err);
    hs_free(kv);
    return rc;
}

uint64_t session_state_bytes(const struct session *s)
{
    /* the sequence at its longest (KV rows of prompt + output cap + the fed last token, its
     * GDN state), a snapshot per planned capture and one at the end, the logits row */
    uint64_t snaps = 2;
    if (s->bank) {
        struct bank_plan_pos plan[BANK_PLAN_MAX];
        struct bank_plan_in in = { .ids = s->ids.v, .n = s->n, .head_len = s->rep.head_tokens,
                                   .user_start = s->rep.user_start, .genprompt_start = s->rep.genprompt_start };
        snaps += (uint64_t)bank_plan(s->bank, s->keys.fp, NULL, &in, plan, NULL);
    }
    return (uint64_t)(s->n + s->max_tokens + 1) * s->keys.kv_row_bytes + snaps * s->keys.snapshot_bytes +
           (uint64_t)s->V * sizeof(float);
}

int64_t session_prefill_pos(const struct session *s) { return s->at; }
int64_t session_prompt_tokens(const struct session *s) { return s->n; }

int session_generate(struct session *s, struct strbuf *piece, bool *emit, bool *done, struct hs_err *err)
{
    struct session_report *r = &s->rep;
    *emit = false;
    *done = s->state != SESSION_PREFILLED;
    if (*done) return HS_OK;
    if (s->n_gen > 0) promote_restored(s); /* the first token is out */
    if (s->pending) {
        int rc = work_run(s, 1, err);
        if (rc != HS_OK) return rc;
    }
    if (s->n_gen == 0) s->script = test_emit_take(&s->n_script);
    int32_t tok = s->n_gen < s->n_script ? s->script[s->n_gen] : sampler_sample(s->smp, s->logits);
    s->gen[s->n_gen++] = tok;
    r->n_output = s->n_gen;
    sampler_accept(s->smp, tok);
    if (s->n_gen == 1) r->ttft_ms = (sys_time_sec() - s->t0) * 1e3;
    bool stop = false;
    for (int k = 0; s->mt && k < s->mt->n_stop_ids; k++) stop |= tok == s->mt->stop_ids[k];
    if (stop && !s->o.ignore_eos) {
        r->stop_reason = SESSION_STOP_END;
        s->state = SESSION_GENERATED;
        *done = true;
        return HS_OK;
    }
    /* an id with no piece (a padding row of the vocabulary) has no text */
    size_t plen, before = piece->len;
    int rc = HS_OK;
    if (s->mt && tokenizer_piece(s->mt->tok, tok, &plen))
        rc = tokenizer_stream_push(&s->ts, tok, s->stopper ? &s->raw : piece, err);
    if (s->stopper && s->raw.len) {
        s->stop_hit = chat_stop_feed(s->stopper, s->raw.buf, s->raw.len, piece);
        strbuf_reset(&s->raw);
    }
    if (piece->len > before) strbuf_append(&s->text, piece->buf + before, piece->len - before);
    if (rc != HS_OK) return rc;
    *emit = true;
    if (s->stop_hit != CHAT_STOP_NONE || s->n_gen == s->max_tokens) {
        s->state = SESSION_GENERATED;
        *done = true;
    } else {
        s->pending = true;
    }
    return HS_OK;
}

void session_generate_end(struct session *s, struct strbuf *piece)
{
    struct session_report *r = &s->rep;
    if (s->state == SESSION_CANCELLED || s->state == SESSION_DONE) return;
    size_t before = piece->len;
    if (s->stop_hit == CHAT_STOP_NONE && s->mt) {
        tokenizer_stream_flush(&s->ts, s->stopper ? &s->raw : piece);
        if (s->stopper) {
            s->stop_hit = chat_stop_feed(s->stopper, s->raw.buf, s->raw.len, piece);
            if (s->stop_hit == CHAT_STOP_NONE) s->stop_hit = chat_stop_finish(s->stopper, piece);
        }
    }
    if (piece->len > before) strbuf_append(&s->text, piece->buf + before, piece->len - before);
    if (s->stop_hit >= 0) {
        r->stop_reason = SESSION_STOP_SEQUENCE;
        r->stop_sequence = hs_strdup(json_string_value(json_array_get(s->stop_list, (size_t)s->stop_hit)));
    } else if (s->stop_hit == CHAT_STOP_TOOL_CALL) {
        r->stop_reason = SESSION_STOP_END;
    }
}

void session_cancel(struct session *s)
{
    if (s->state == SESSION_DONE) return;
    s->state = SESSION_CANCELLED;
    s->rep.stop_reason = SESSION_STOP_CANCELLED;
}

int session_finish(struct session *s, struct hs_err *err)
{
    struct session_report *r = &s->rep;
    if (s->state == SESSION_DONE) return HS_OK;
    s->state = SESSION_DONE;
    /* feed the last token so the sequence sits at the end of the path the bank stores
     * (invariant 4) */
    int rc = HS_OK;
    if (feed_last_wanted(s)) {
        rc = engine_forward(s->e, s->sq, &s->gen[s->n_gen - 1], 1, NULL, 0, NULL, 0, NULL, err);
        s->fed_last = rc == HS_OK;
    }
    struct hs_err ferr;
    hs_err_clear(&ferr);
    const bool model_ok = !s->bank || model_files_check(engine_model(s->e), &ferr) == HS_OK;
    if (rc == HS_OK && s->prefilled && !model_ok) {
        s->bank = NULL; /* changed during the request (invariant 2a) */
        r->bank_off = SESSION_BANK_OFF_MODEL_CHANGED;
    }
    /* a promotion still left, before the store: its rows then need not leave the sequence */
    if (model_ok) promote_restored(s);
    else bank_restored_free(&s->br);
    if (rc == HS_OK && s->prefilled && s->bank) {
        const int64_t n_total = s->n + s->n_gen;
        const size_t row_bytes = s->keys.kv_row_bytes, snap_bytes = s->keys.snapshot_bytes;
        int32_t *path = hs_malloc((size_t)n_total * sizeof(int32_t));
        memcpy(path, s->ids.v, (size_t)s->n * sizeof(int32_t));
        memcpy(path + s->n, s->gen, (size_t)s->n_gen * sizeof(int32_t));
        struct bank_snap_in snaps[BANK_PLAN_MAX + 1];
        int ns = 0;
        for (int i = 0; i < s->n_caps; i++)
            if (s->caps[i].filled) snaps[ns++] = (struct bank_snap_in){ s->caps[i].pos, s->cap_kind[i], s->caps[i].buf };
        void *end = hs_malloc(HS_MAX(snap_bytes, (size_t)1));
        seq_snapshot(s->sq, end);
        if (ns == 0 || snaps[ns - 1].pos < n_total) snaps[ns++] = (struct bank_snap_in){ n_total, BANK_SNAP_END, end };
        /* only the rows neither tier holds (nor has queued) leave the sequence */
        int64_t from = bank_store_rows_from(s->bank, s->disk, &s->keys, path, n_total, snaps, ns);
        void *kv = hs_malloc(HS_MAX((size_t)(n_total - from) * row_bytes, (size_t)1));
        rc = seq_kv_read(s->sq, from, n_total, kv) == HS_OK
                 ? HS_OK
                 : hs_err_set(err, HS_ERR_INVALID, "session: KV rows [%lld, %lld) not in the sequence",
                              (long long)from, (long long)n_total);
        if (rc == HS_OK) rc = bank_store(s->bank, s->disk, &s->keys, path, n_total, from, kv, snaps, ns, &r->n_disk_puts, err);
        /* the answer stands whatever happens to the bank: a failed store only loses reuse */
        if (rc != HS_OK) {
            hs_log_write(HS_LOG_WARN, "session: not banked: %s", err->msg);
            rc = HS_OK;
        } else {
            r->banked = true;
        }
        hs_free(end);
        hs_free(kv);
        hs_free(path);
    }
    r->total_ms = (sys_time_sec() - s->t0) * 1e3;
    return rc;
}

const struct session_report *session_report(const struct session *s)
{
    return &s->rep;
}

const int32_t *session_output_ids(const struct session *s)
{
    return s->gen;
}

void session_take_report(struct session *s, struct session_report *out)
{
    *out = s->rep;
    out->output_ids = s->gen;
    out->n_output = s->n_gen;
    out->text = strbuf_detach(&s->text, &out->text_len);
    s->gen = NULL;
    s->n_gen = 0;
    memset(&s->rep, 0, sizeof(s->rep));
}

void session_free(struct session *s)
{
    if (!s) return;
    bank_restored_free(&s->br);
    session_report_free(&s->rep);
    for (int i = 0; i < s->n_caps; i++) hs_free(s->caps[i].buf);
    hs_free(s->gen);
    hs_free(s->script);
    hs_free(s->logits);
    sampler_free(s->smp);
    seq_free(s->sq);
    chat_stop_free(s->stopper);
    tokenizer_ids_free(&s->ids);
    strbuf_free(&s->forced);
    strbuf_free(&s->raw);
    strbuf_free(&s->text);
    hs_free(s);
}

/* ---- one request, start to end ------------------------------------------------------------ */

/* The prefill in chunks of about SESSION_PREFILL_CHUNK_S seconds, sized from the last
 * chunk's rate and growing from 64 tokens at most twofold per chunk, the hook called
 * between them; one step without a hook. False: the hook stopped it. */
static int run_prefill(struct session *s, const struct session_opts *o, void *ctx, bool *go, struct hs_err *err)
{
    bool done = false;
    if (!o->on_prefill) return session_prefill(s, 0, &done, err);
    int64_t chunk = 64;
    for (;;) {
        int64_t k = HS_MIN(chunk, s->n - s->at);
        double t = sys_time_sec();
        int rc = session_prefill(s, k, &done, err);
        if (rc != HS_OK || done) return rc;
        /* the next chunk: what the last one's rate does in the target time, but at most
         * twice the last (a token costs more the further it is: attention) */
        double dt = sys_time_sec() - t;
        double rate = dt > 1e-6 ? (double)k / dt : 1e9;
        chunk = HS_MAX((int64_t)16, HS_MIN(2 * k, (int64_t)(rate * SESSION_PREFILL_CHUNK_S)));
        if (!o->on_prefill(ctx, s->at, s->n)) {
            *go = false;
            return HS_OK;
        }
    }
}

int session_run(struct engine *e, const struct model_text *mt, struct bank *bank, const struct api_request *rq,
                const struct session_opts *o, session_text_fn on_text, void *ctx,
                struct session_report *out, struct hs_err *err)
{
    memset(out, 0, sizeof(*out));
    struct session *s = NULL;
    int rc = session_new(e, mt, bank, rq, o, &s, err);
    if (rc != HS_OK) return rc;
    rc = session_restore(s, err);
    bool go = rc == HS_OK;
    if (go && o->on_start && !o->on_start(ctx, session_start_info(s))) go = false;
    if (go) rc = run_prefill(s, o, ctx, &go, err);
    struct strbuf piece;
    strbuf_init(&piece);
    for (bool done = false; rc == HS_OK && go && !done;) {
        bool emit;
        strbuf_reset(&piece);
        rc = session_generate(s, &piece, &emit, &done, err);
        if (rc == HS_OK && emit && on_text && !on_text(ctx, piece.len ? piece.buf : "", piece.len)) go = false;
    }
    if (rc == HS_OK && go) {
        strbuf_reset(&piece);
        session_generate_end(s, &piece);
        if (piece.len && on_text) on_text(ctx, piece.buf, piece.len);
    }
    strbuf_free(&piece);
    if (rc == HS_OK && !go) session_cancel(s);
    if (rc == HS_OK) rc = session_finish(s, err);
    if (rc == HS_OK) session_take_report(s, out);
    session_free(s);
    return rc;
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
    jsonw_key(&w, "cache_source"); jsonw_str(&w, bank_source_name(r->cache_source));
    jsonw_key(&w, "head_tokens"); jsonw_int(&w, r->head_tokens);
    jsonw_key(&w, "user_start"); jsonw_int(&w, r->user_start);
    jsonw_key(&w, "genprompt_start"); jsonw_int(&w, r->genprompt_start);
    jsonw_key(&w, "match_len"); jsonw_int(&w, r->match_len);
    jsonw_key(&w, "restore_reason"); jsonw_str(&w, r->bank_used ? bank_reason_name(r->restore_reason) : "no_bank");
    jsonw_key(&w, "captures"); jsonw_int(&w, r->n_captures);
    jsonw_key(&w, "banked"); jsonw_bool(&w, r->banked);
    jsonw_key(&w, "stop_reason"); jsonw_str(&w, session_stop_name(r->stop_reason));
    if (r->stop_sequence) { jsonw_key(&w, "stop_sequence"); jsonw_str(&w, r->stop_sequence); }
    if (r->forced_text) { jsonw_key(&w, "forced_text"); jsonw_str(&w, r->forced_text); }
    if (r->bank_off) { jsonw_key(&w, "bank_off"); jsonw_str(&w, session_bank_off_name(r->bank_off)); }
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
    jsonw_key(&w, "remote_discarded"); jsonw_int(&w, r->remote_discarded);
    jsonw_key(&w, "disk_puts"); jsonw_int(&w, r->n_disk_puts);
    jsonw_obj_end(&w);
}
