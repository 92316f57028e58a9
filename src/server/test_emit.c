/*
 * test_emit.c — TEST ONLY: make a model "say" scripted texts, so the end-to-end tests can
 * drive the real output path (tool-call and reasoning parsing, both APIs' bodies and SSE
 * streams, the official SDKs parsing them) with a tiny random model whose own words are
 * noise.
 *
 * `headstart serve` calls test_emit_load once at start. When the environment variable
 * HEADSTART_TEST_EMIT names a file, that file is a JSON array of strings; each string is
 * tokenized with the model's tokenizer (special tokens recognised, as in a prompt) and an
 * end-of-turn id is appended. From then on each generation (session.c) takes the next
 * script in file order, wrapping around after the last, and generates its ids instead of
 * sampling; past the script's end it samples as usual (only reached with ignore_eos).
 *
 * Invariants:
 *   1. Off unless the variable is set: nothing else turns it on, and no request field can
 *      reach it (it is process state, read before the server listens).
 *   2. When on, serve logs a warning at start saying so and naming the file, so a server
 *      in this mode is never mistaken for a real one.
 *   3. A bad file (unreadable, not an array of strings, empty) stops serve from starting.
 *   4. Scripted ids go through the same forward, decode, stop-string, parse and bank path
 *      as sampled ones; only the choice of the next id differs.
 */
#include "server/server_int.h"
#include "sys/sys.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TEST_EMIT_MAX_BYTES (16u << 20)

struct test_emit_script {
    int32_t *ids;
    int64_t n;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct test_emit_script *g_scripts; /* NULL: off */
static size_t g_n, g_next;

int test_emit_load(const struct model_text *mt, struct hs_err *err)
{
    const char *path = getenv(TEST_EMIT_ENV);
    if (!path || !path[0]) return HS_OK;
    char *data = NULL;
    size_t len = 0;
    int rc = sys_file_read_all(path, TEST_EMIT_MAX_BYTES, &data, &len, err);
    if (rc != HS_OK) {
        hs_err_prefix(err, "%s: ", TEST_EMIT_ENV);
        return rc;
    }
    json_error_t je;
    json_t *arr = json_loadb(data, len, 0, &je);
    hs_free(data);
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        json_decref(arr);
        return hs_err_set(err, HS_ERR_INVALID, "%s (%s): not a non-empty JSON array of strings", path, TEST_EMIT_ENV);
    }
    int32_t eot = mt->im_end_id >= 0 ? mt->im_end_id : mt->n_stop_ids > 0 ? mt->stop_ids[0] : -1;
    if (eot < 0) {
        json_decref(arr);
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: the model has no end-of-turn token", TEST_EMIT_ENV);
    }
    size_t n = json_array_size(arr);
    struct test_emit_script *s = hs_calloc(n, sizeof(*s));
    for (size_t i = 0; i < n && rc == HS_OK; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_string(v)) {
            rc = hs_err_set(err, HS_ERR_INVALID, "%s (%s): [%zu] is not a string", path, TEST_EMIT_ENV, i);
            break;
        }
        struct tokenizer_ids ids = { 0 };
        rc = tokenizer_encode(mt->tok, json_string_value(v), json_string_length(v), 0, &ids, err);
        if (rc != HS_OK) break;
        s[i].ids = hs_malloc((ids.n + 1) * sizeof(int32_t));
        if (ids.n) memcpy(s[i].ids, ids.v, ids.n * sizeof(int32_t));
        s[i].ids[ids.n] = eot;
        s[i].n = (int64_t)ids.n + 1;
        tokenizer_ids_free(&ids);
    }
    json_decref(arr);
    if (rc != HS_OK) {
        for (size_t i = 0; i < n; i++) hs_free(s[i].ids);
        hs_free(s);
        return rc;
    }
    test_emit_free();
    pthread_mutex_lock(&g_mu);
    g_scripts = s;
    g_n = n;
    g_next = 0;
    pthread_mutex_unlock(&g_mu);
    hs_log_write(HS_LOG_WARN, "serve: TEST MODE (%s=%s): generation emits %zu scripted text(s) instead of "
                 "sampling the model; never use this outside tests", TEST_EMIT_ENV, path, n);
    return HS_OK;
}

int32_t *test_emit_take(int64_t *n)
{
    *n = 0;
    pthread_mutex_lock(&g_mu);
    int32_t *ids = NULL;
    if (g_scripts) {
        const struct test_emit_script *s = &g_scripts[g_next];
        g_next = (g_next + 1) % g_n;
        ids = hs_malloc((size_t)s->n * sizeof(int32_t));
        memcpy(ids, s->ids, (size_t)s->n * sizeof(int32_t));
        *n = s->n;
    }
    pthread_mutex_unlock(&g_mu);
    return ids;
}

void test_emit_free(void)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_n; i++) hs_free(g_scripts[i].ids);
    hs_free(g_scripts);
    g_scripts = NULL;
    g_n = g_next = 0;
    pthread_mutex_unlock(&g_mu);
}
