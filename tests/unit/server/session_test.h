/* session_test.h — one OpenAI chat body through the request parse and session_run, as
 * `headstart replay` runs it (the tests of the request path start from bodies). */
#ifndef HS_TEST_SESSION_TEST_H
#define HS_TEST_SESSION_TEST_H

#include "server/server.h"

static inline int test_session_run_body(struct engine *e, const struct model_text *mt, struct bank *bank,
                                        const json_t *body, const struct session_opts *o, session_text_fn on_text,
                                        void *ctx, struct session_report *out, struct hs_err *err)
{
    struct api_sampling defaults;
    session_sampling_defaults(&defaults);
    struct api_request req;
    memset(out, 0, sizeof(*out));
    int rc = api_request_parse(API_KIND_OPENAI_CHAT, body, &defaults, &req, err);
    if (rc == HS_OK) rc = session_run(e, mt, bank, &req, o, on_text, ctx, out, err);
    api_request_free(&req);
    return rc;
}

#endif
