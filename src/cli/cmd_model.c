/*
 * cmd_model.c — `headstart inspect` and `headstart mkmodel`: their option tables; the work
 * is model/'s and mkmodel/'s (model_inspect, mkmodel_write).
 */
#include "cli/cli.h"
#include "format/format.h"
#include "mkmodel/mkmodel.h"
#include "model/model.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int arch_set(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    int arch = model_arch_from_name(s);
    if (arch < 0) { fprintf(stderr, "headstart %s: unknown --arch '%s' (qwen35, qwen35moe, qwen3next, qwen4exp)\n", cmd, s); return -1; }
    *(enum model_arch *)dst = (enum model_arch)arch;
    return 0;
}

static int dtype_set(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    /* q4_k_m / q5_k_m are llama.cpp's Q4_K (Q5_K) / Q6_K mixes; the options carry them as
     * DTYPE_Q4_K / DTYPE_Q5_K */
    /* ud_q4_k_xl: a mixed file (mkmodel.c note 3), carried as DTYPE_Q8_0 plus ud_mix; dst is
     * the options' dtype member, so the options are found from it */
    struct mkmodel_opts *mo = (struct mkmodel_opts *)(void *)((char *)dst - offsetof(struct mkmodel_opts, dtype));
    mo->ud_mix = !strcmp(s, "ud_q4_k_xl");
    if (mo->ud_mix) {
        *(enum dtype *)dst = DTYPE_Q8_0;
        return 0;
    }
    bool km = !strcmp(s, "q4_k_m") || !strcmp(s, "q5_k_m");
    int d = !strcmp(s, "q4_k_m") ? DTYPE_Q4_K : !strcmp(s, "q5_k_m") ? DTYPE_Q5_K : dtype_from_name(s);
    if (d < 0 || !dtype_info((enum dtype)d)->compute ||
        ((d == DTYPE_Q4_K || d == DTYPE_Q5_K || d == DTYPE_Q6_K) && !km)) {
        fprintf(stderr, "headstart %s: --dtype must be f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q5_1, iq4_nl, iq4_xs or ud_q4_k_xl, not '%s'\n", cmd, s);
        return -1;
    }
    *(enum dtype *)dst = (enum dtype)d;
    return 0;
}

#define MK(f) offsetof(struct mkmodel_opts, f)
#define MK_INT(nm, f, h) { .kind = CLI_OPT_I64, .name = nm, .arg = "N", .off = MK(f), .help = h }
static const struct cli_opt mkmodel_opts[] = {
    { .kind = CLI_OPT_FN, .name = "--arch", .arg = "ARCH", .off = MK(arch), .fn = arch_set,
      .help = "qwen35, qwen35moe, qwen3next or qwen4exp", .def = "qwen35" },
    { .kind = CLI_OPT_STR, .name = "--preset", .arg = "P", .off = MK(preset),
      .help = "the shape: tiny, 0.8b, 2b or 4b", .def = "tiny" },
    MK_INT("--layers", n_layer, "layers (the options below override the preset's shape)"),
    MK_INT("--hidden", n_embd, "hidden size"),
    MK_INT("--heads", n_head, "attention heads"),
    MK_INT("--kv-heads", n_head_kv, "attention key/value heads"),
    MK_INT("--head-dim", head_dim, "attention head size"),
    MK_INT("--ffn", n_ff, "feed-forward size"),
    MK_INT("--gdn-k-heads", gdn_k_heads, "Gated DeltaNet key heads"),
    MK_INT("--gdn-v-heads", gdn_v_heads, "Gated DeltaNet value heads"),
    MK_INT("--gdn-head-dim", gdn_head_dim, "Gated DeltaNet head size"),
    MK_INT("--experts", n_expert, "MoE experts"),
    MK_INT("--experts-used", n_expert_used, "MoE experts used per token"),
    MK_INT("--expert-ffn", n_ff_exp, "MoE expert feed-forward size"),
    MK_INT("--hc-streams", hc_streams, "qwen4exp: hyper-connection residual streams (4)"),
    MK_INT("--hc-rank", hc_rank, "qwen4exp: rank of the hyper-connection mixers (32)"),
    MK_INT("--indexer-heads", indexer_heads, "qwen4exp: QSA indexer query heads (2)"),
    MK_INT("--indexer-head-dim", indexer_head_dim, "qwen4exp: indexer head size (the attention head size)"),
    MK_INT("--qsa-budget", qsa_budget, "qwen4exp: tokens a query attends to, in blocks of 4 (2048; small values prune short prompts)"),
    MK_INT("--ngram", ngram, "qwen4exp: n-gram orders 2..N are hashed (3)"),
    MK_INT("--ngram-heads", ngram_heads, "qwen4exp: hashed heads per order (2)"),
    MK_INT("--ngram-row", ngram_row, "qwen4exp: n-gram table row width (hidden / heads; llama.cpp needs heads x row = hidden)"),
    MK_INT("--ngram-table-rows", ngram_table_rows, "qwen4exp: table rows (default: successive primes from 101 per head, padded to 128)"),
    MK_INT("--ngram-shards", ngram_shards, "qwen4exp: tensors the HF table is split into (4)"),
    MK_INT("--ngram-conv-kernel", ngram_conv_kernel, "qwen4exp: taps of the n-gram dilated conv (4)"),
    { .kind = CLI_OPT_FN, .name = "--dtype", .arg = "T", .off = MK(dtype), .fn = dtype_set,
      .help = "matrix weights: f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q5_1, iq4_nl, iq4_xs or ud_q4_k_xl (a mix; norms stay f32)",
      .def = "f32" },
    { .kind = CLI_OPT_U64, .name = "--seed", .arg = "N", .off = MK(seed), .help = "the random weights' seed", .def = "0" },
    { .kind = CLI_OPT_STR, .name = "--tokenizer", .arg = "tokenizer.json", .off = MK(tokenizer_json),
      .help = "this tokenizer instead of the small built-in one" },
    { .kind = CLI_OPT_STR, .name = "--chat-template", .arg = "FILE.jinja", .off = MK(chat_template),
      .help = "this chat template instead of the built-in Qwen3.5 one" },
    { .kind = CLI_OPT_STR, .name = "--out", .arg = "DIR|FILE.gguf", .off = MK(out),
      .help = "where to write it (required)" },
    { 0 },
};

static const struct cli_command mkmodel_cmd = {
    .name = "mkmodel",
    .usage = "--arch qwen35|qwen35moe|qwen3next|qwen4exp [--preset tiny|0.8b|2b|4b] [options]\n"
             "         --out DIR|FILE.gguf",
    .about = "Writes a random-weight model. A path ending in .gguf gets a GGUF file that llama.cpp\n"
             "loads; anything else becomes a Hugging Face directory (config.json, model.safetensors,\n"
             "tokenizer.json, tokenizer_config.json). Without --tokenizer a small byte-level BPE\n"
             "tokenizer with the ChatML/Qwen special tokens is written. qwen4exp (Qwen3.8-Flash-Next)\n"
             "gets hyper-connections, the QSA indexer and the hashed n-gram table on layer 1, whose\n"
             "reset token is the tokenizer's <|endoftext|>.\n",
    .opts = mkmodel_opts,
};

int cmd_mkmodel(int argc, char **argv)
{
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    int pr = cli_parse(&mkmodel_cmd, argc, argv, &o, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    if (!o.out) { fprintf(stderr, "headstart mkmodel: --out is required (see --help)\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    if (mkmodel_write(&o, &err) != HS_OK) {
        fprintf(stderr, "headstart mkmodel: %s\n", err.msg);
        return 1;
    }
    return 0;
}

struct inspect_args {
    bool json;
};

static const struct cli_opt inspect_opts[] = {
    { .kind = CLI_OPT_FLAG, .name = "--json", .off = offsetof(struct inspect_args, json),
      .help = "one JSON object instead of text" },
    { 0 },
};

static const struct cli_command inspect_cmd = {
    .name = "inspect",
    .usage = "MODEL [--json]",
    .about = "MODEL is a Hugging Face directory (config.json + *.safetensors) or a .gguf file.\n"
             "Prints the architecture, hyperparameters, per-layer kinds, every tensor (name,\n"
             "dtype, shape, bytes), the parameter count, file size and tokenizer summary.\n",
    .opts = inspect_opts,
    .max_pos = 1,
    .too_many_pos = "one model at a time ('%s' and '%s')",
};

int cmd_inspect(int argc, char **argv)
{
    struct inspect_args a = { 0 };
    const char *pos[CLI_POS_MAX];
    int n_pos = 0;
    int pr = cli_parse(&inspect_cmd, argc, argv, &a, pos, &n_pos);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    if (!n_pos) { fprintf(stderr, "headstart inspect: which model? (see --help)\n"); return 2; }
    const char *path = pos[0];
    bool json = a.json;
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
