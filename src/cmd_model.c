/*
 * cmd_model.c — `headstart inspect` and `headstart mkmodel`: option parsing; the work is
 * model/'s and mkmodel/'s (model_inspect, mkmodel_write).
 */
#include "cmd.h"
#include "format/format.h"
#include "mkmodel/mkmodel.h"
#include "model/model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char mkmodel_help[] =
    "usage: headstart mkmodel --arch qwen35|qwen35moe|qwen3next [--preset tiny|0.8b|2b|4b]\n"
    "         [--layers N] [--hidden N] [--heads N] [--kv-heads N] [--head-dim N] [--ffn N]\n"
    "         [--gdn-k-heads N] [--gdn-v-heads N] [--gdn-head-dim N]\n"
    "         [--experts N] [--experts-used N] [--expert-ffn N]\n"
    "         [--dtype f32|f16|bf16|q8_0|q4_k_m|q5_k_m] [--seed N] [--tokenizer tokenizer.json]\n"
    "         [--chat-template FILE.jinja] --out DIR|FILE.gguf\n"
    "\n"
    "Writes a random-weight model. A path ending in .gguf gets a GGUF file that llama.cpp\n"
    "loads; anything else becomes a Hugging Face directory (config.json, model.safetensors,\n"
    "tokenizer.json, tokenizer_config.json). Without --tokenizer a small byte-level BPE\n"
    "tokenizer with the ChatML/Qwen special tokens is written.\n";


int cmd_mkmodel(int argc, char **argv)
{
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    static const struct { const char *name; size_t off; } int_opts[] = {
        { "--layers", offsetof(struct mkmodel_opts, n_layer) },
        { "--hidden", offsetof(struct mkmodel_opts, n_embd) },
        { "--heads", offsetof(struct mkmodel_opts, n_head) },
        { "--kv-heads", offsetof(struct mkmodel_opts, n_head_kv) },
        { "--head-dim", offsetof(struct mkmodel_opts, head_dim) },
        { "--ffn", offsetof(struct mkmodel_opts, n_ff) },
        { "--gdn-k-heads", offsetof(struct mkmodel_opts, gdn_k_heads) },
        { "--gdn-v-heads", offsetof(struct mkmodel_opts, gdn_v_heads) },
        { "--gdn-head-dim", offsetof(struct mkmodel_opts, gdn_head_dim) },
        { "--experts", offsetof(struct mkmodel_opts, n_expert) },
        { "--experts-used", offsetof(struct mkmodel_opts, n_expert_used) },
        { "--expert-ffn", offsetof(struct mkmodel_opts, n_ff_exp) },
    };
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(mkmodel_help, stdout); return 0; }
        if (i + 1 >= argc) { fprintf(stderr, "headstart mkmodel: %s needs a value (see --help)\n", a); return 2; }
        const char *v = argv[++i];
        bool done = false;
        for (size_t k = 0; k < HS_ARRAY_LEN(int_opts) && !done; k++) {
            if (strcmp(a, int_opts[k].name)) continue;
            if (cmd_parse_i64("mkmodel", a, v, (int64_t *)((char *)&o + int_opts[k].off))) return 2;
            done = true;
        }
        if (done) continue;
        if (!strcmp(a, "--arch")) {
            int arch = model_arch_from_name(v);
            if (arch < 0) { fprintf(stderr, "headstart mkmodel: unknown --arch '%s' (qwen35, qwen35moe, qwen3next)\n", v); return 2; }
            o.arch = (enum model_arch)arch;
        } else if (!strcmp(a, "--preset")) o.preset = v;
        else if (!strcmp(a, "--dtype")) {
            /* q4_k_m / q5_k_m are llama.cpp's Q4_K (Q5_K) / Q6_K mixes; the options carry them
             * as DTYPE_Q4_K / DTYPE_Q5_K */
            bool km = !strcmp(v, "q4_k_m") || !strcmp(v, "q5_k_m");
            int d = !strcmp(v, "q4_k_m") ? DTYPE_Q4_K : !strcmp(v, "q5_k_m") ? DTYPE_Q5_K : dtype_from_name(v);
            if (d < 0 || !dtype_info((enum dtype)d)->compute ||
                ((d == DTYPE_Q4_K || d == DTYPE_Q5_K || d == DTYPE_Q6_K) && !km)) {
                fprintf(stderr, "headstart mkmodel: --dtype must be f32, f16, bf16, q8_0, q4_k_m or q5_k_m, not '%s'\n", v);
                return 2;
            }
            o.dtype = (enum dtype)d;
        } else if (!strcmp(a, "--seed")) {
            int64_t s;
            if (cmd_parse_i64("mkmodel", a, v, &s)) return 2;
            o.seed = (uint64_t)s;
        } else if (!strcmp(a, "--tokenizer")) o.tokenizer_json = v;
        else if (!strcmp(a, "--chat-template")) o.chat_template = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else { fprintf(stderr, "headstart mkmodel: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!o.out) { fprintf(stderr, "headstart mkmodel: --out is required (see --help)\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    if (mkmodel_write(&o, &err) != HS_OK) {
        fprintf(stderr, "headstart mkmodel: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: headstart inspect MODEL [--json]\n\n"
                 "MODEL is a Hugging Face directory (config.json + *.safetensors) or a .gguf file.\n"
                 "Prints the architecture, hyperparameters, per-layer kinds, every tensor (name,\n"
                 "dtype, shape, bytes), the parameter count, file size and tokenizer summary.");
            return 0;
        } else if (argv[i][0] == '-') { fprintf(stderr, "headstart inspect: unknown option '%s'\n", argv[i]); return 2; }
        else if (!path) path = argv[i];
        else { fprintf(stderr, "headstart inspect: one model at a time ('%s')\n", argv[i]); return 2; }
    }
    if (!path) { fprintf(stderr, "headstart inspect: which model? (see --help)\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    struct strbuf out;
    strbuf_init(&out);
    int rc = model_inspect(path, json, &out, &err);
    if (rc != HS_OK) {
        fprintf(stderr, "headstart inspect: %s\n", err.msg);
        strbuf_free(&out);
        return 1;
    }
    fwrite(out.buf, 1, out.len, stdout);
    strbuf_free(&out);
    return 0;
}
