#!/usr/bin/env python3
# qwen4exp_mk.py — writes one tiny random Qwen3.8-Flash-Next (`qwen4exp`) model twice, with
# the same weights: as a Hugging Face directory (config.json with a `text_config`, F32
# model.safetensors under the HF names, the three I64 PLE hash buffers) and as an f32 GGUF
# file that llama.cpp v0.5.0 loads (its tensor names and ne order, the `qwen4exp.*` keys).
# It is the independent writer of the qwen4exp reference (tools/ref/forward_qwen4exp.py
# evaluates the HF side, llama.cpp the GGUF side) and shares nothing with headstart: numpy
# and the standard library only.
#
#   /usr/bin/python3 tools/ref/qwen4exp_mk.py --tokenizer-gguf TINY.gguf [--tokenizer-dir DIR]
#       --hf OUT_DIR --gguf OUT.gguf [geometry flags, see --help]
#
# The vocabulary comes from an existing GGUF (the tokenizer.* keys are copied verbatim, e.g.
# from `headstart mkmodel --arch qwen35 --out tiny.gguf`); the embedding and LM head get one
# row per token of it. --tokenizer-dir copies tokenizer.json / tokenizer_config.json (e.g.
# from the same mkmodel written as a directory) into the HF directory.
#
# Design notes (facts established against the sources in
# /work/shared/reference/qwen38-architecture.md, HF `modeling_qwen4_exp.py` and llama.cpp
# v0.5.0 `src/models/qwen4exp.cpp`, `conversion/qwen4exp.py`, `conversion/qwen.py`):
#  - Tiny default geometry: hidden 64, 4 layers (layer i is full attention iff i % 4 == 3, so
#    layer 3; PLE on layer 1, a GDN layer), 4 hyper-connection streams of low rank 8, GDN
#    Hk 2 / Hv 4 / head 16, attention 4 heads / 2 kv heads / head 32 (rotary 8 dims),
#    indexer 4 heads x 32 (one key head), 8 experts, 2 used, width 16, shared expert 16,
#    PLE 3-grams with 2 heads per order (4 heads x 16 = 64 = hidden), PLE conv kernel 4.
#  - llama.cpp needs the PLE embedding width (heads x row width) to equal hidden (its
#    ple_key is {n_embd, hc*n_embd}), and one GDN head size for k and v (ssm.state_size):
#    both are checked here.
#  - Hash constants follow HF `_build_layer_multipliers` / `_find_nth_prime_after` (spec
#    §5.1): multipliers from SplitMix64 seeded with seed + 10007 * ple_layer_index (the
#    index within ple_layer_ids, 0 here), odd and below (2^63-1)/V; primes from the first
#    prime >= --ngram-base (default 1000: 1009, 1013, 1019, 1021), offsets their prefix
#    sums, table rows padded to a multiple of 128. They are written into both files.
#  - GGUF conversion as llama.cpp's converter does it: +1 folded into every zero-centred
#    gamma (hc_norm, q/k_norm, indexer q/k norms, the three PLE norms) but not ssm_norm;
#    ssm_a = -exp(A_log); the GDN value heads reordered from grouped (kh*r + j) to tiled
#    (j*Hk + kh) in attn_qkv's V rows, attn_gate, ssm_beta/alpha, ssm_dt, ssm_a, the V
#    channels of ssm_conv1d and the columns of ssm_out; the indexer projection split into
#    q_proj (first heads*dim rows) and k_proj; experts split into gate / up; conv weights
#    squeezed; the PLE shards concatenated in shard order into per_layer_token_embd.
#  - The HF PLE table is written as `split_ngram_parts` shards
#    (`...ngram_embedding.shard_{i}.weight`), as the released checkpoint stores it (spec §11).
#  - layer_types uses "full_attention" / "linear_attention" (the released config, spec §1.1,
#    and what llama.cpp's converter tests for when it writes attention.compress_ratios); the
#    transformers configuration class read for this note calls the attention layers
#    "deepseek_sparse_attention" / "hybrid_indexed" when it derives them, and its
#    validate_architecture() accepts only those two and "linear_attention" — not in the spec.
#  - llama.cpp constraints a tiny geometry must meet (not in the spec): the M-RoPE sections
#    (11+11+10 = 32, IMROPE) must fit every roped head, so head_dim and indexer_head_dim are
#    >= 32 (ggml's rope asserts sect_dims <= ne0, and the indexer keys/queries are roped);
#    the PLE width (heads x row) equals hidden; the GDN k and v head sizes are equal.
#  - Checked (tests/golden/qwen4exp_ref.sh): llama.cpp on the GGUF and the numpy reference on
#    the HF directory agree to 5e-7 .. 3e-6 of the largest |logit| on five geometries (f32
#    KV cache; 3e-5 with llama.cpp's default f16 cache), so this file's GGUF means the same
#    model as its HF directory.
import argparse, json, math, os, shutil, struct, sys
import numpy as np

# ---------------------------------------------------------------- GGUF (read KV, write all)
GT_U8, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STR, GT_ARR, GT_U64, GT_I64, GT_F64 = range(13)
_SCALAR = {GT_U8: '<B', GT_I8: '<b', GT_U16: '<H', GT_I16: '<h', GT_U32: '<I', GT_I32: '<i',
           GT_F32: '<f', GT_BOOL: '<B', GT_U64: '<Q', GT_I64: '<q', GT_F64: '<d'}


def gguf_read_kv(path):
    """The metadata of a GGUF file: [(key, type, raw value bytes, python value)] in file order."""
    b = open(path, 'rb').read()
    if b[:4] != b'GGUF':
        sys.exit(f'{path}: not a GGUF file')
    ver, n_t, n_kv = struct.unpack_from('<IQQ', b, 4)
    off = 24

    def rstr(o):
        n = struct.unpack_from('<Q', b, o)[0]
        return b[o + 8:o + 8 + n].decode('utf-8'), o + 8 + n

    def rval(t, o):
        if t == GT_STR:
            return rstr(o)
        if t == GT_ARR:
            et, n = struct.unpack_from('<IQ', b, o)
            o += 12
            out = []
            for _ in range(n):
                v, o = rval(et, o)
                out.append(v)
            return out, o
        f = _SCALAR[t]
        return struct.unpack_from(f, b, o)[0], o + struct.calcsize(f)

    kvs = []
    for _ in range(n_kv):
        k, off = rstr(off)
        t = struct.unpack_from('<I', b, off)[0]
        start = off + 4
        v, off = rval(t, start)
        kvs.append((k, t, b[start:off], v))
    return kvs


def _str(s):
    e = s.encode('utf-8')
    return struct.pack('<Q', len(e)) + e


def kv_u32(v): return GT_U32, struct.pack('<I', v)
def kv_f32(v): return GT_F32, struct.pack('<f', v)
def kv_str(v): return GT_STR, _str(v)
def kv_arr(et, vals):
    f = _SCALAR[et]
    return GT_ARR, struct.pack('<IQ', et, len(vals)) + b''.join(struct.pack(f, v) for v in vals)


def gguf_write(path, kvs, tensors, align=32):
    """kvs: [(key, type, raw value bytes)]; tensors: [(name, float32 array)], written as F32 with
    ne = the numpy shape reversed (fastest dimension first)."""
    head = bytearray(b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)))
    for k, t, raw in kvs:
        head += _str(k) + struct.pack('<I', t) + raw
    off = 0
    blobs = []
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype='<f4')
        ne = a.shape[::-1]
        head += _str(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', n) for n in ne)
        head += struct.pack('<IQ', 0, off)  # type F32, offset in the data section
        blobs.append(a.tobytes())
        off += len(blobs[-1])
        off = (off + align - 1) // align * align
    with open(path, 'wb') as f:
        f.write(head)
        f.write(b'\0' * ((-len(head)) % align))
        pos = 0
        for blob in blobs:
            f.write(blob)
            pos += len(blob)
            pad = (-pos) % align
            f.write(b'\0' * pad)
            pos += pad


# ---------------------------------------------------------------- safetensors
def safetensors_write(path, tensors):
    """tensors: [(name, array)] with float32 (F32) or int64 (I64) arrays."""
    hdr, off, blobs = {}, 0, []
    for name, a in tensors:
        dt = {np.dtype('<f4'): 'F32', np.dtype('<i8'): 'I64'}[a.dtype.newbyteorder('<')]
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tobytes()
        hdr[name] = {'dtype': dt, 'shape': list(a.shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * ((-len(h)) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for blob in blobs:
            f.write(blob)


# ---------------------------------------------------------------- PLE hash constants (spec §5.1)
M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return (x ^ (x >> 31)) & M64


def ple_multipliers(vocab, ngram, ple_index, seed):
    half = max(1, ((1 << 63) - 1) // max(vocab, 1) // 2)
    base = seed + 10007 * ple_index
    return [2 * (splitmix64((base + 0x9E3779B97F4A7C15 * (i + 1)) & M64) % half) + 1 for i in range(ngram)]


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def ple_primes(base, n_heads, ple_index):
    """Head h of PLE module ple_index gets the (ple_index*n_heads + h + 1)-th prime >= base."""
    out, p, need = [], base - 1, (ple_index + 1) * n_heads
    while len(out) < need:
        p += 1
        while not is_prime(p):
            p += 1
        out.append(p)
    return out[ple_index * n_heads:]


# ---------------------------------------------------------------- the model
def main():
    ap = argparse.ArgumentParser(description='tiny random qwen4exp model as HF directory + f32 GGUF')
    ap.add_argument('--tokenizer-gguf', required=True, help='GGUF whose tokenizer.* keys are copied')
    ap.add_argument('--tokenizer-dir', help='directory with tokenizer.json / tokenizer_config.json to copy')
    ap.add_argument('--hf', help='output Hugging Face directory')
    ap.add_argument('--gguf', help='output GGUF file')
    ap.add_argument('--seed', type=int, default=7, help='random weights')
    ap.add_argument('--hash-seed', type=int, default=1234, help='config "seed" of the PLE multipliers')
    ap.add_argument('--hidden', type=int, default=64)
    ap.add_argument('--layers', type=int, default=4, help='a multiple of 4')
    ap.add_argument('--hc', type=int, default=4, help='hyper-connection streams (> 1)')
    ap.add_argument('--hc-rank', type=int, default=8)
    ap.add_argument('--gdn-k-heads', type=int, default=2)
    ap.add_argument('--gdn-v-heads', type=int, default=4)
    ap.add_argument('--gdn-head-dim', type=int, default=16)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--kv-heads', type=int, default=2)
    ap.add_argument('--head-dim', type=int, default=32)
    ap.add_argument('--idx-heads', type=int, default=4)
    ap.add_argument('--idx-head-dim', type=int, default=32)
    ap.add_argument('--idx-budget', type=int, default=2048, help='indexer budget in tokens')
    ap.add_argument('--experts', type=int, default=8)
    ap.add_argument('--experts-used', type=int, default=2)
    ap.add_argument('--expert-ffn', type=int, default=16)
    ap.add_argument('--shared-ffn', type=int, default=16)
    ap.add_argument('--ngram', type=int, default=3)
    ap.add_argument('--heads-per-ngram', type=int, default=2)
    ap.add_argument('--ple-row', type=int, default=0, help='PLE row width (default hidden / PLE heads)')
    ap.add_argument('--ngram-base', type=int, default=1000)
    ap.add_argument('--ngram-pad', type=int, default=128)
    ap.add_argument('--ngram-parts', type=int, default=2, help='HF shards of the PLE table')
    ap.add_argument('--zero-indexer-q', action='store_true',
                    help='indexer query rows all zero: every block scores exactly 0 (tie test)')
    a = ap.parse_args()

    H, L, n, r = a.hidden, a.layers, a.hc, a.hc_rank
    Hk, Hv, D = a.gdn_k_heads, a.gdn_v_heads, a.gdn_head_dim
    nh, nkv, hd = a.heads, a.kv_heads, a.head_dim
    ih, ihd = a.idx_heads, a.idx_head_dim
    E, Eu, I, Is = a.experts, a.experts_used, a.expert_ffn, a.shared_ffn
    N, Kh = a.ngram, a.heads_per_ngram
    Hn = (N - 1) * Kh
    row = a.ple_row or H // Hn
    partial = 0.25
    nrot = int(hd * partial)
    errs = []
    if L % 4: errs.append('--layers must be a multiple of 4')
    if n < 2: errs.append('--hc must be > 1')
    if Hv % Hk: errs.append('--gdn-v-heads must be a multiple of --gdn-k-heads')
    if nh % nkv: errs.append('--heads must be a multiple of --kv-heads')
    if Hn * row != H: errs.append(f'PLE heads x row width ({Hn} x {row}) must equal --hidden (llama.cpp)')
    if nrot > ihd: errs.append(f'rotary dims {nrot} exceed --idx-head-dim {ihd}')
    if min(hd, ihd) < 32:
        errs.append('llama.cpp\'s IMROPE asserts that the M-RoPE sections (11+11+10 = 32) fit every roped head: '
                    '--head-dim and --idx-head-dim must be >= 32')
    if a.idx_budget % 4: errs.append('--idx-budget must be a multiple of 4')
    if not 2 <= N <= 8: errs.append('--ngram must be in [2, 8]')
    if errs:
        sys.exit('qwen4exp_mk: ' + '; '.join(errs))
    if not a.hf and not a.gguf:
        sys.exit('qwen4exp_mk: nothing to write (--hf and/or --gguf)')

    tok_kvs = [(k, t, raw) for k, t, raw, v in gguf_read_kv(a.tokenizer_gguf) if k.startswith('tokenizer.')]
    tk = {k: v for k, t, raw, v in gguf_read_kv(a.tokenizer_gguf)}
    V = len(tk['tokenizer.ggml.tokens'])
    eos = int(tk['tokenizer.ggml.eos_token_id'])  # <|endoftext|> in headstart's tiny tokenizer

    ple_layer = 1
    layer_types = ['full_attention' if i % 4 == 3 else 'linear_attention' for i in range(L)]
    mult = ple_multipliers(V, N, 0, a.hash_seed)
    primes = ple_primes(a.ngram_base, Hn, 0)
    offs = [sum(primes[:h]) for h in range(Hn)]
    rows = -(-sum(primes) // a.ngram_pad) * a.ngram_pad
    if rows % a.ngram_parts:
        sys.exit('qwen4exp_mk: the padded PLE table does not split into --ngram-parts equal shards')

    rng = np.random.default_rng(a.seed)
    f32 = lambda x: np.asarray(x, dtype=np.float32)
    def mat(o, i, gain=1.0): return f32(rng.standard_normal((o, i)) * gain / math.sqrt(i))
    def zc(k): return f32(rng.standard_normal(k) * 0.1)   # zero-centred gamma (HF stores w, uses 1 + w)

    P = 'model.language_model.'
    hf = []                        # (HF name, array)
    def put(name, arr): hf.append((name, arr))
    put(P + 'embed_tokens.weight', f32(rng.standard_normal((V, H))))
    put('lm_head.weight', mat(V, H, 2.0))
    def hc_module(pfx, inject=True):
        put(pfx + 'hc_norm.weight', zc(n * H))
        put(pfx + 'input_mix_weight_down.weight', mat(r, n * H))
        put(pfx + 'input_mix_weight_up.weight', mat(n * H, r, 2.0))
        if inject:
            put(pfx + 'block_inject_weight.weight', mat(n, n * H, 2.0))
    hc_module(P + 'hyper_connection_mixer.', inject=False)
    for l in range(L):
        p = P + f'layers.{l}.'
        hc_module(p + 'attn_hyper_connection.')
        hc_module(p + 'mlp_hyper_connection.')
        if layer_types[l] == 'full_attention':
            s = p + 'self_attn.'
            put(s + 'q_proj.weight', mat(nh * hd * 2, H))
            put(s + 'k_proj.weight', mat(nkv * hd, H))
            put(s + 'v_proj.weight', mat(nkv * hd, H))
            put(s + 'o_proj.weight', mat(H, nh * hd))
            put(s + 'q_norm.weight', zc(hd))
            put(s + 'k_norm.weight', zc(hd))
            w = mat((ih + 1) * ihd, H, 2.0)
            if a.zero_indexer_q:
                w[:ih * ihd] = 0
            put(s + 'indexer.index_qk_proj.weight', w)
            put(s + 'indexer.q_layernorm.weight', zc(ihd))
            put(s + 'indexer.k_layernorm.weight', zc(ihd))
        else:
            s = p + 'linear_attn.'
            put(s + 'in_proj_qkv.weight', mat(2 * Hk * D + Hv * D, H))
            put(s + 'in_proj_z.weight', mat(Hv * D, H))
            put(s + 'in_proj_b.weight', mat(Hv, H))
            put(s + 'in_proj_a.weight', mat(Hv, H))
            put(s + 'conv1d.weight', f32(rng.standard_normal((2 * Hk * D + Hv * D, 1, 4)) * 0.5))
            put(s + 'dt_bias', f32(rng.standard_normal(Hv) * 0.5))
            put(s + 'A_log', f32(np.log(rng.uniform(0.5, 4.0, Hv))))
            put(s + 'norm.weight', f32(1 + rng.standard_normal(D) * 0.1))
            put(s + 'out_proj.weight', mat(H, Hv * D))
        if l == ple_layer:
            s = p + 'ple.'
            for i in range(a.ngram_parts):
                put(s + f'ple_embedding.ngram_embedding.shard_{i}.weight',
                    f32(rng.standard_normal((rows // a.ngram_parts, row))))
            put(s + 'key_proj.weight', mat(n * H, H))
            put(s + 'value_proj.weight', mat(H, H))
            put(s + 'norm_key.weight', zc(n * H))
            put(s + 'norm_query.weight', zc(n * H))
            put(s + 'norm_conv.weight', zc(n * H))
            put(s + 'conv1d.weight', f32(rng.standard_normal((n * H, 1, 4)) * 0.5))
            put(s + 'ple_embedding.layer_multipliers', np.array(mult, dtype='<i8'))
            put(s + 'ple_embedding.ngram_heads_offsets', np.array(offs, dtype='<i8'))
            put(s + 'ple_embedding.ngram_heads_vocab_sizes', np.array(primes, dtype='<i8'))
        m = p + 'mlp.'
        put(m + 'gate.weight', mat(E, H, 2.0))
        put(m + 'experts.gate_up_proj', f32(rng.standard_normal((E, 2 * I, H)) / math.sqrt(H)))
        put(m + 'experts.down_proj', f32(rng.standard_normal((E, H, I)) / math.sqrt(I)))
        put(m + 'shared_expert.gate_proj.weight', mat(Is, H))
        put(m + 'shared_expert.up_proj.weight', mat(Is, H))
        put(m + 'shared_expert.down_proj.weight', mat(H, Is))
        put(m + 'shared_expert_gate.weight', mat(1, H))

    if a.hf:
        os.makedirs(a.hf, exist_ok=True)
        tc = {
            'model_type': 'qwen4_exp_text', 'vocab_size': V, 'hidden_size': H,
            'num_hidden_layers': L, 'layer_types': layer_types, 'full_attention_interval': 4,
            'num_attention_heads': nh, 'num_key_value_heads': nkv, 'head_dim': hd,
            'attention_bias': False, 'hidden_act': 'silu', 'rms_norm_eps': 1e-6,
            'rope_parameters': {'rope_type': 'default', 'rope_theta': 1e7, 'partial_rotary_factor': partial,
                                'mrope_section': [11, 11, 10], 'mrope_interleaved': True},
            'max_position_embeddings': 4096,
            'linear_num_key_heads': Hk, 'linear_num_value_heads': Hv, 'linear_key_head_dim': D,
            'linear_value_head_dim': D, 'linear_conv_kernel_dim': 4, 'output_gate_type': 'sigmoid',
            'mamba_ssm_dtype': 'float32',
            'num_experts': E, 'num_experts_per_tok': Eu, 'moe_intermediate_size': I,
            'shared_expert_intermediate_size': Is, 'norm_topk_prob': True,
            'hc_count': n, 'hc_lowrank': r,
            'indexer_n_heads': ih, 'indexer_kv_heads': 1, 'indexer_head_dim': ihd,
            'indexer_budget': a.idx_budget, 'indexer_compress_ratio': 4,
            'ple_layer_ids': [ple_layer + 1], 'ple_embed_dim': Hn * row, 'ple_conv_kernel_size': 4,
            'ngram_size': N, 'heads_per_ngram': Kh, 'ngram_vocab_size_base': a.ngram_base,
            'make_ngram_vocab_size_divisible_by': a.ngram_pad, 'split_ngram_parts': a.ngram_parts,
            'seed': a.hash_seed, 'mtp_num_hidden_layers': 0,
            'tie_word_embeddings': False, 'eos_token_id': eos, 'pad_token_id': eos, 'dtype': 'float32',
        }
        cfg = {'architectures': ['Qwen4ExpForConditionalGeneration'], 'model_type': 'qwen4_exp',
               'text_config': tc, 'tie_word_embeddings': False}
        with open(os.path.join(a.hf, 'config.json'), 'w') as f:
            json.dump(cfg, f, indent=2)
            f.write('\n')
        safetensors_write(os.path.join(a.hf, 'model.safetensors'), hf)
        if a.tokenizer_dir:
            for fn in ('tokenizer.json', 'tokenizer_config.json'):
                if os.path.exists(os.path.join(a.tokenizer_dir, fn)):
                    shutil.copy(os.path.join(a.tokenizer_dir, fn), os.path.join(a.hf, fn))

    if a.gguf:
        W = dict(hf)
        rv = Hv // Hk
        def tile(x, axis, width):
            """grouped value heads (kh*r + j) -> tiled (j*Hk + kh) along axis, head width `width`"""
            x = np.moveaxis(x, axis, 0)
            s = x.shape
            x = x.reshape((Hk, rv, width) + s[1:]).swapaxes(0, 1).reshape(s)
            return np.moveaxis(x, 0, axis)
        t = []
        def g(name, arr): t.append((name, f32(arr)))
        g('token_embd.weight', W[P + 'embed_tokens.weight'])
        g('output.weight', W['lm_head.weight'])
        def hc_g(dst, src, inject=True, head=False):
            k = (lambda s: f'output_hc_{s}.weight') if head else (lambda s: f'{dst}_{s}.weight')
            g(k('norm'), (W[src + 'hc_norm.weight'] + 1).reshape(n, H))
            g(k('down'), W[src + 'input_mix_weight_down.weight'])
            g(k('up'), W[src + 'input_mix_weight_up.weight'])
            if inject:
                g(k('inject'), W[src + 'block_inject_weight.weight'])
        hc_g(None, P + 'hyper_connection_mixer.', inject=False, head=True)
        for l in range(L):
            p = P + f'layers.{l}.'
            b = f'blk.{l}.'
            hc_g(b + 'hc_attn', p + 'attn_hyper_connection.')
            hc_g(b + 'hc_ffn', p + 'mlp_hyper_connection.')
            if layer_types[l] == 'full_attention':
                s = p + 'self_attn.'
                g(b + 'attn_q.weight', W[s + 'q_proj.weight'])
                g(b + 'attn_k.weight', W[s + 'k_proj.weight'])
                g(b + 'attn_v.weight', W[s + 'v_proj.weight'])
                g(b + 'attn_output.weight', W[s + 'o_proj.weight'])
                g(b + 'attn_q_norm.weight', W[s + 'q_norm.weight'] + 1)
                g(b + 'attn_k_norm.weight', W[s + 'k_norm.weight'] + 1)
                w = W[s + 'indexer.index_qk_proj.weight']
                g(b + 'indexer.q_proj.weight', w[:ih * ihd])
                g(b + 'indexer.k_proj.weight', w[ih * ihd:])
                g(b + 'indexer.q_norm.weight', W[s + 'indexer.q_layernorm.weight'] + 1)
                g(b + 'indexer.k_norm.weight', W[s + 'indexer.k_layernorm.weight'] + 1)
            else:
                s = p + 'linear_attn.'
                qkv = W[s + 'in_proj_qkv.weight']
                g(b + 'attn_qkv.weight', np.concatenate([qkv[:2 * Hk * D], tile(qkv[2 * Hk * D:], 0, D)]))
                g(b + 'attn_gate.weight', tile(W[s + 'in_proj_z.weight'], 0, D))
                g(b + 'ssm_beta.weight', tile(W[s + 'in_proj_b.weight'], 0, 1))
                g(b + 'ssm_alpha.weight', tile(W[s + 'in_proj_a.weight'], 0, 1))
                cw = W[s + 'conv1d.weight'][:, 0, :]
                g(b + 'ssm_conv1d.weight', np.concatenate([cw[:2 * Hk * D], tile(cw[2 * Hk * D:], 0, D)]))
                g(b + 'ssm_dt.bias', tile(W[s + 'dt_bias'], 0, 1))
                g(b + 'ssm_a', tile(-np.exp(W[s + 'A_log'].astype(np.float64)), 0, 1))
                g(b + 'ssm_norm.weight', W[s + 'norm.weight'])
                g(b + 'ssm_out.weight', tile(W[s + 'out_proj.weight'], 1, D))
            if l == ple_layer:
                s = p + 'ple.'
                g('per_layer_token_embd.weight', np.concatenate(
                    [W[s + f'ple_embedding.ngram_embedding.shard_{i}.weight'] for i in range(a.ngram_parts)]))
                g(b + 'ple_key.weight', W[s + 'key_proj.weight'])
                g(b + 'ple_value.weight', W[s + 'value_proj.weight'])
                for nm in ('key', 'query', 'conv'):
                    g(b + f'ple_norm_{nm}.weight', (W[s + f'norm_{nm}.weight'] + 1).reshape(n, H))
                g(b + 'ple_conv1d.weight', W[s + 'conv1d.weight'][:, 0, :])
            m = p + 'mlp.'
            g(b + 'ffn_gate_inp.weight', W[m + 'gate.weight'])
            gu = W[m + 'experts.gate_up_proj']
            g(b + 'ffn_gate_exps.weight', gu[:, :I, :])
            g(b + 'ffn_up_exps.weight', gu[:, I:, :])
            g(b + 'ffn_down_exps.weight', W[m + 'experts.down_proj'])
            g(b + 'ffn_gate_inp_shexp.weight', W[m + 'shared_expert_gate.weight'][0])
            g(b + 'ffn_gate_shexp.weight', W[m + 'shared_expert.gate_proj.weight'])
            g(b + 'ffn_up_shexp.weight', W[m + 'shared_expert.up_proj.weight'])
            g(b + 'ffn_down_shexp.weight', W[m + 'shared_expert.down_proj.weight'])

        A = 'qwen4exp.'
        kv = [('general.architecture',) + kv_str('qwen4exp'),
              ('general.name',) + kv_str('qwen4exp tiny reference (tools/ref/qwen4exp_mk.py)'),
              (A + 'context_length',) + kv_u32(4096),
              (A + 'embedding_length',) + kv_u32(H),
              (A + 'block_count',) + kv_u32(L),
              (A + 'attention.head_count',) + kv_u32(nh),
              (A + 'attention.head_count_kv',) + kv_u32(nkv),
              (A + 'attention.key_length',) + kv_u32(hd),
              (A + 'attention.value_length',) + kv_u32(hd),
              (A + 'attention.layer_norm_rms_epsilon',) + kv_f32(1e-6),
              (A + 'rope.freq_base',) + kv_f32(1e7),
              (A + 'rope.dimension_count',) + kv_u32(nrot),
              (A + 'rope.dimension_sections',) + kv_arr(GT_I32, [11, 11, 10, 0]),
              (A + 'expert_count',) + kv_u32(E),
              (A + 'expert_used_count',) + kv_u32(Eu),
              (A + 'expert_feed_forward_length',) + kv_u32(I),
              (A + 'expert_shared_feed_forward_length',) + kv_u32(Is),
              (A + 'ssm.conv_kernel',) + kv_u32(4),
              (A + 'ssm.state_size',) + kv_u32(D),
              (A + 'ssm.group_count',) + kv_u32(Hk),
              (A + 'ssm.time_step_rank',) + kv_u32(Hv),
              (A + 'ssm.inner_size',) + kv_u32(Hv * D),
              (A + 'attention.recurrent_layers',) + kv_arr(GT_BOOL, [int(x == 'linear_attention') for x in layer_types]),
              (A + 'full_attention_interval',) + kv_u32(4),
              (A + 'hyper_connection.count',) + kv_u32(n),
              (A + 'hyper_connection.low_rank',) + kv_u32(r),
              (A + 'attention.indexer.head_count',) + kv_u32(ih),
              (A + 'attention.indexer.key_length',) + kv_u32(ihd),
              (A + 'attention.indexer.top_k',) + kv_u32(a.idx_budget),
              (A + 'attention.compress_ratios',) + kv_arr(GT_U32, [4 if x == 'full_attention' else 0 for x in layer_types]),
              (A + 'ple.layers',) + kv_arr(GT_U32, [ple_layer]),
              (A + 'ple.ngram_size',) + kv_u32(N),
              (A + 'ple.heads_per_ngram',) + kv_u32(Kh),
              (A + 'ple.conv_kernel',) + kv_u32(4),
              (A + 'ple.eos_token_id',) + kv_u32(eos),
              (A + 'embedding_length_per_layer_input',) + kv_u32(row),
              (A + 'ple.layer_multipliers',) + kv_arr(GT_U64, mult),
              (A + 'ple.head_offsets',) + kv_arr(GT_U64, offs),
              (A + 'ple.head_vocab_sizes',) + kv_arr(GT_U64, primes)] + tok_kvs
        gguf_write(a.gguf, kv, t)
    print(f'qwen4exp tiny: vocab {V}, eos {eos}, hidden {H}, layers {L}, hc {n}x{r}, GDN {Hk}/{Hv}x{D}, '
          f'attn {nh}/{nkv}x{hd}, indexer {ih}x{ihd} budget {a.idx_budget}, experts {E}/{Eu}x{I} shared {Is}, '
          f'PLE {N}-gram {Kh}/order row {row}, table {rows} rows, multipliers {mult}, primes {primes}')


if __name__ == '__main__':
    main()
