#!/usr/bin/env python3
# ref_forward.py — an independent numpy (float64) forward pass of a Qwen3.5 / Qwen3.5-MoE /
# Qwen3-Next model stored as a Hugging Face directory with f32 safetensors (what
# `headstart mkmodel --dtype f32` writes). It follows docs/MODELS.md
# literally — HF conventions throughout: zero-centred norms (1 + w), A_log, grouped value
# heads (h // r), fused Qwen3-Next projections — and shares no code with headstart.
#
#   /usr/bin/python3 tools/ref/forward.py MODEL_DIR ID,ID,... OUT.f32
#
# Writes the logits of every position as raw little-endian f32, n_tokens x n_vocab.
# A qwen4_exp (Qwen3.8-Flash-Next) directory is handed to tools/ref/forward_qwen4exp.py
# (same arguments, plus its --qsa-top-k / --tie-rule / --dump-selection options).
import json, struct, sys, numpy as np
d, toks, out = sys.argv[1], [int(x) for x in sys.argv[2].split(',')], sys.argv[3]
cfg = json.load(open(d + '/config.json'))
tc = cfg.get('text_config', cfg)
if any(c.get('model_type', '').startswith('qwen4_exp') for c in (cfg, tc)):  # Flash-Next: own file, same args
    import os
    os.execv(sys.executable, [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                           'forward_qwen4exp.py')] + sys.argv[1:])
raw = open(d + '/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
hdr = json.loads(raw[8:8+n]); base = 8 + n
W = {}
for k, v in hdr.items():
    if k == '__metadata__': continue
    assert v['dtype'] == 'F32'
    a, b = v['data_offsets']
    W[k] = np.frombuffer(raw[base+a:base+b], dtype='<f4').reshape(v['shape']).astype(np.float64)
P = 'model.language_model.' if 'text_config' in cfg else 'model.'
H = tc['hidden_size']; L = tc['num_hidden_layers']; nh = tc['num_attention_heads']; nkv = tc['num_key_value_heads']; hd = tc['head_dim']
Hk = tc['linear_num_key_heads']; Hv = tc['linear_num_value_heads']; Dk = tc['linear_key_head_dim']; Dv = tc['linear_value_head_dim']; K = tc['linear_conv_kernel_dim']
eps = tc['rms_norm_eps']; rp = tc.get('rope_parameters', tc); theta = rp['rope_theta']; nrot = int(hd * rp['partial_rotary_factor'])
r = Hv // Hk; T = len(toks)
def rms(x, w, zc=True):
    y = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    return y * ((1 + w) if zc else w)
silu = lambda x: x / (1 + np.exp(-x)); sig = lambda x: 1 / (1 + np.exp(-x))
h = W[P + 'embed_tokens.weight'][toks]
pos = np.arange(T)
inv = theta ** (-np.arange(0, nrot, 2) / nrot)
ang = pos[:, None] * inv[None, :]; cos, sin = np.cos(ang), np.sin(ang)
def rope(x):  # [T, heads, hd]
    x = x.copy(); a = x[..., :nrot//2].copy(); b = x[..., nrot//2:nrot].copy()
    c = cos[:, None, :]; s = sin[:, None, :]
    x[..., :nrot//2] = a * c - b * s; x[..., nrot//2:nrot] = b * c + a * s
    return x
for il in range(L):
    p = P + f'layers.{il}.'
    x = rms(h, W[p + 'input_layernorm.weight'])
    if tc['layer_types'][il] == 'full_attention':
        qg = (x @ W[p + 'self_attn.q_proj.weight'].T).reshape(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]
        k = (x @ W[p + 'self_attn.k_proj.weight'].T).reshape(T, nkv, hd)
        v = (x @ W[p + 'self_attn.v_proj.weight'].T).reshape(T, nkv, hd)
        q = rope(rms(q, W[p + 'self_attn.q_norm.weight'])); k = rope(rms(k, W[p + 'self_attn.k_norm.weight']))
        o = np.zeros((T, nh, hd))
        for j in range(nh):
            m = j // (nh // nkv)
            s = q[:, j] @ k[:, m].T / np.sqrt(hd)
            s = np.where(np.tril(np.ones((T, T))) > 0, s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
            o[:, j] = s @ v[:, m]
        o = o.reshape(T, -1) * sig(gate.reshape(T, -1))
        h = h + o @ W[p + 'self_attn.o_proj.weight'].T
    else:
        a_ = p + 'linear_attn.'
        if a_ + 'in_proj_qkvz.weight' in W:
            m = (x @ W[a_ + 'in_proj_qkvz.weight'].T).reshape(T, Hk, 2 * Dk + 2 * r * Dv)
            q_ = m[..., :Dk].reshape(T, -1); k_ = m[..., Dk:2*Dk].reshape(T, -1)
            v_ = m[..., 2*Dk:2*Dk + r*Dv].reshape(T, -1); z = m[..., 2*Dk + r*Dv:].reshape(T, -1)
            pr = np.concatenate([q_, k_, v_], -1)
            ba = (x @ W[a_ + 'in_proj_ba.weight'].T).reshape(T, Hk, 2 * r)
            b = ba[..., :r].reshape(T, -1); a = ba[..., r:].reshape(T, -1)
        else:
            pr = x @ W[a_ + 'in_proj_qkv.weight'].T; z = x @ W[a_ + 'in_proj_z.weight'].T
            b = x @ W[a_ + 'in_proj_b.weight'].T; a = x @ W[a_ + 'in_proj_a.weight'].T
        cw = W[a_ + 'conv1d.weight'][:, 0, :]  # [C, K]
        pp = np.concatenate([np.zeros((K - 1, pr.shape[1])), pr], 0)
        c = np.stack([(pp[t:t+K] * cw.T).sum(0) for t in range(T)]); c = silu(c)
        q = c[:, :Hk*Dk].reshape(T, Hk, Dk); k = c[:, Hk*Dk:2*Hk*Dk].reshape(T, Hk, Dk); v = c[:, 2*Hk*Dk:].reshape(T, Hv, Dv)
        q = q / np.sqrt((q*q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(Dk)
        k = k / np.sqrt((k*k).sum(-1, keepdims=True) + 1e-6)
        beta = sig(b); g = -np.exp(W[a_ + 'A_log']) * np.log1p(np.exp(a + W[a_ + 'dt_bias']))
        S = np.zeros((Hv, Dk, Dv)); o = np.zeros((T, Hv, Dv))
        for t in range(T):
            for hh in range(Hv):
                kh = hh // r
                S[hh] *= np.exp(g[t, hh]); u = S[hh].T @ k[t, kh]
                S[hh] += np.outer(k[t, kh], beta[t, hh] * (v[t, hh] - u)); o[t, hh] = S[hh].T @ q[t, kh]
        y = rms(o, W[a_ + 'norm.weight'], zc=False) * silu(z.reshape(T, Hv, Dv))
        h = h + y.reshape(T, -1) @ W[a_ + 'out_proj.weight'].T
    x = rms(h, W[p + 'post_attention_layernorm.weight'])
    if p + 'mlp.gate.weight' in W:
        E = tc['num_experts']; kk = tc['num_experts_per_tok']
        lg = x @ W[p + 'mlp.gate.weight'].T; pr_ = np.exp(lg - lg.max(-1, keepdims=True)); pr_ /= pr_.sum(-1, keepdims=True)
        y = np.zeros_like(x)
        for t in range(T):
            top = np.argsort(-pr_[t])[:kk]; wts = pr_[t, top] / pr_[t, top].sum()
            for e, wt in zip(top, wts):
                if p + 'mlp.experts.gate_up_proj' in W:
                    gu = W[p + 'mlp.experts.gate_up_proj'][e]; I = gu.shape[0] // 2
                    gt, up, dn = gu[:I], gu[I:], W[p + 'mlp.experts.down_proj'][e]
                else:
                    gt, up, dn = [W[p + f'mlp.experts.{e}.{n}_proj.weight'] for n in ('gate', 'up', 'down')]
                y[t] += wt * (dn @ (silu(gt @ x[t]) * (up @ x[t])))
        sh = (silu(x @ W[p + 'mlp.shared_expert.gate_proj.weight'].T) * (x @ W[p + 'mlp.shared_expert.up_proj.weight'].T)) @ W[p + 'mlp.shared_expert.down_proj.weight'].T
        y += sig(x @ W[p + 'mlp.shared_expert_gate.weight'].T) * sh
        h = h + y
    else:
        h = h + (silu(x @ W[p + 'mlp.gate_proj.weight'].T) * (x @ W[p + 'mlp.up_proj.weight'].T)) @ W[p + 'mlp.down_proj.weight'].T
h = rms(h, W[P + 'norm.weight'])
lm = W.get('lm_head.weight', W[P + 'embed_tokens.weight'])
np.asarray(h @ lm.T, dtype='<f4').tofile(out)
