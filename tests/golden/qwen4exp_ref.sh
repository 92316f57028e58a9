#!/bin/sh
# qwen4exp_ref.sh — the independent qwen4exp (Qwen3.8-Flash-Next) reference against
# llama.cpp. tools/ref/qwen4exp_mk.py writes one tiny random model twice with the same
# weights (HF directory + f32 GGUF; the vocabulary is copied from a `headstart mkmodel`
# GGUF); tools/ref/forward_qwen4exp.py runs the HF math in numpy float64 on the directory,
# llama.cpp (build/llama_eval, --kv-f32 when offered) runs the GGUF. Neither shares code with
# headstart, so this checks the reference and the writer's GGUF conventions, and gives the
# lead's C forward pass two outside answers to agree with.
#
#  1. Dense regime (every query p <= 2050 sees at most 512 = budget/4 complete blocks, so QSA
#     equals causal attention): a 64-token prompt, the same with <|endoftext|> (the PLE
#     n-gram reset token) at positions 10, 30 and 31, and a 2,050-token prompt. Logits
#     within 1e-4 of llama.cpp relative to the largest |logit|, the same argmax at every
#     position whose llama.cpp top-2 margin exceeds that tolerance, and 16 greedy tokens
#     identical. Four more geometries on the 64-token prompt (two attention layers, Hv/Hk 3,
#     hc 2/3/8, 2- to 5-grams, head dims 64). Measured (f32 KV cache, 1 thread): 5e-7 ..
#     3e-6 on 64 tokens, 1.9e-6 on 2,050, argmax equal everywhere.
#  2. Sparse regime checked against llama.cpp: the same weights with the GGUF's
#     indexer.top_k = 32 tokens (8 blocks) and one attention layer (layer 3 of 4), on a
#     200-token prompt, against the reference with --qsa-top-k 8. llama.cpp selects 35
#     (= 32 + 4 - 1) *cells* by score; the reference whole blocks plus the open tail. They
#     attend the same set exactly when the tail holds 3 tokens, p = 2 (mod 4), and with one
#     attention layer a position's logits depend on no other position's selection, so
#     those rows must agree within 1e-4 (measured 4.9e-7), while the dense reference must
#     not (pruning is in effect; measured 9e-2). The other rows differ by design (llama.cpp
#     admits 3 - |tail| cells of the 9th block; measured 1.8e-2 .. 2.3e-2) and are printed.
#     This is what checks the indexer (pooled keys, their norm, RoPE at 4b, ReLU head sum).
#  3. The top-k tie rule on a constructed case: a model whose indexer query rows are all
#     zero, so every block scores exactly 0.0; with --qsa-top-k 8 on 200 tokens every
#     query with more than 8 complete blocks must select blocks 0..7 (lowest index first),
#     and the logits must differ from the same run with the ties broken the other way (so
#     the tie reaches the logits and this check can fail).
#  4. --qsa-top-k on the HF side equals the budget in config.json: the reference on the
#     budget-2048 directory with --qsa-top-k 8 is bit-identical to the budget-32 one.
# Prints every measured error and ends with "RESULT: N passed, N failed". Run from the
# repository root with HEADSTART_BUILD set; needs make deps (numpy, node-llama-cpp).
set -u
. "$(dirname "$0")/lib/llama.sh"
llama_setup

tmp=$(mktemp -d /tmp/hs-qwen4exp-ref.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
llama_ids
mk=tools/ref/qwen4exp_mk.py
ref=tools/ref/forward_qwen4exp.py

# the vocabulary (tokenizer.* keys; 704 tokens, <|endoftext|> = eos = 656) of headstart's tiny model
if ! "$hs" mkmodel --arch qwen35 --seed 1 --dtype f32 --out "$tmp/tok.gguf" >"$tmp/log" 2>&1 ||
   ! "$hs" mkmodel --arch qwen35 --seed 1 --dtype f32 --out "$tmp/tok.hf" >>"$tmp/log" 2>&1; then
    fail "mkmodel (tokenizer source)"; cat "$tmp/log"; finish
fi
eos=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["text_config"]["eos_token_id"])' "$tmp/tok.hf/config.json")
nv=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["text_config"]["vocab_size"])' "$tmp/tok.hf/config.json")

make_model() { # NAME ARGS...: $tmp/NAME.hf and $tmp/NAME.gguf
    name=$1; shift
    $py $mk --tokenizer-gguf "$tmp/tok.gguf" --tokenizer-dir "$tmp/tok.hf" \
        --hf "$tmp/$name.hf" --gguf "$tmp/$name.gguf" "$@" >"$tmp/log" 2>&1 && return 0
    fail "$name: qwen4exp_mk.py"; cat "$tmp/log"; return 1
}
run_llama() { # GGUF IDS OUT
    timeout 300 "$eval_bin" --lib-dir "$libdir" "$1" --tokens "$2" --logits-out "$3" --threads 1 $kv_flag \
        >"$tmp/log" 2>&1 && return 0
    tail -5 "$tmp/log"; return 1
}
run_ref() { # DIR IDS OUT [ARGS]
    d=$1 i=$2 o=$3; shift 3
    $py $ref "$d" "$i" "$o" "$@" >"$tmp/log" 2>&1 && return 0
    tail -5 "$tmp/log"; return 1
}
# compare A B T TOL [ROWS]: A and B are T x V logits; ROWS "all", "mod4=R" or "mod4!=R".
# Prints "OK|BAD rel=... argmax_equal=N/M (D at near-ties) scale=..."; rel is max |a-b| over the
# rows compared, divided by the largest |b|; an argmax difference fails unless b's own top-2
# margin there is at most TOL times the scale.
compare() {
    $py - "$@" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype='<f4').astype(np.float64); b = np.fromfile(sys.argv[2], dtype='<f4').astype(np.float64)
T = int(sys.argv[3]); tol = float(sys.argv[4]); rows = sys.argv[5] if len(sys.argv) > 5 else 'all'
if a.size != b.size or a.size == 0 or a.size % T:
    print(f"BAD sizes {a.size} vs {b.size}"); sys.exit()
a = a.reshape(T, -1); b = b.reshape(T, -1); p = np.arange(T)
sel = {'all': p >= 0}.get(rows)
if sel is None:
    r = int(rows[-1]); sel = (p % 4 == r) if rows.startswith('mod4=') else (p % 4 != r)
a, b = a[sel], b[sel]
s = float(np.abs(b).max()); rel = float(np.abs(a - b).max()) / s
top2 = np.sort(b, 1)[:, -2:]; margin = top2[:, 1] - top2[:, 0]
diff = a.argmax(1) != b.argmax(1); hard = int((diff & (margin > tol * s)).sum())
ok = rel <= tol and hard == 0 and np.isfinite(a).all()
print(("OK" if ok else "BAD") + f" rel={rel:.2e} argmax_equal={int((~diff).sum())}/{len(b)}"
      f" ({int(diff.sum()) - hard} at near-ties) scale={s:.2f}")
PY
}
greedy() { # WHO(ref|llama) MODEL IDS N: the N greedy tokens, space separated
    who=$1 m=$2 cur=$3
    out=
    for _ in $(seq "$4"); do
        if [ "$who" = ref ]; then run_ref "$m" "$cur" "$tmp/g.f32" || return 1
        else run_llama "$m" "$cur" "$tmp/g.f32" || return 1
        fi
        t=$($py -c 'import sys, numpy as np; n = len(sys.argv[2].split(",")); print(int(np.fromfile(sys.argv[1], dtype="<f4").reshape(n, -1)[-1].argmax()))' "$tmp/g.f32" "$cur")
        out="$out $t"; cur="$cur,$t"
    done
    echo $out
}
report() { # LABEL VERDICT
    case $2 in OK*) pass "$1: $2" ;; *) fail "$1: $2" ;; esac
}

ids64=$ids
ids64e=$($py -c 'import sys; l = sys.argv[1].split(","); l[10] = l[30] = l[31] = sys.argv[2]; print(",".join(l))' "$ids" "$eos")
ids2050=$($py -c 'import random, sys; r = random.Random(3); print(",".join(str(r.randrange(int(sys.argv[1]))) for _ in range(2050)))' "$nv")
ids200=$($py -c 'import random, sys; r = random.Random(9); print(",".join(str(r.randrange(int(sys.argv[1]))) for _ in range(200)))' "$nv")
tol=1e-4

# 1. dense regime
if make_model dense --seed 7; then
    for case in "64 $ids64" "64-eos $ids64e" "2050 $ids2050"; do
        set -- $case
        label=$1 i=$2 T=$(echo "$2" | tr ',' '\n' | wc -l)
        if run_ref "$tmp/dense.hf" "$i" "$tmp/d.ref" && run_llama "$tmp/dense.gguf" "$i" "$tmp/d.ll"; then
            report "dense regime, $label-token prompt, numpy vs llama.cpp (tol $tol)" "$(compare "$tmp/d.ref" "$tmp/d.ll" "$T" $tol)"
        else
            fail "dense regime, $label-token prompt: a run failed"
        fi
    done
    a=$(greedy ref "$tmp/dense.hf" "$ids64e" 16) && b=$(greedy llama "$tmp/dense.gguf" "$ids64e" 16)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "greedy 16 tokens identical: $a"
    else fail "greedy 16 tokens: numpy [$a], llama.cpp [$b]"
    fi
fi

# other geometries (64-token prompt with eos): two attention layers, Hv/Hk = 3, one kv head,
# hc 2 / 3 / 8, bigrams only and 5-grams, one indexer head, head dims 64, wider experts
for spec in "--layers 8 --hc 2 --hc-rank 4 --gdn-k-heads 1 --gdn-v-heads 3 --ngram 2 --heads-per-ngram 4 --kv-heads 1 --experts 6 --experts-used 3 --seed 3" \
            "--ngram 5 --heads-per-ngram 1 --hc 3 --gdn-k-heads 2 --gdn-v-heads 6 --idx-heads 1 --seed 4" \
            "--hidden 48 --ngram 4 --heads-per-ngram 2 --idx-heads 2 --idx-head-dim 64 --head-dim 64 --seed 5" \
            "--hidden 128 --hc 8 --hc-rank 16 --experts 16 --experts-used 4 --expert-ffn 32 --shared-ffn 24 --seed 6"; do
    # shellcheck disable=SC2086
    make_model geo $spec || continue
    if run_ref "$tmp/geo.hf" "$ids64e" "$tmp/g.ref" && run_llama "$tmp/geo.gguf" "$ids64e" "$tmp/g.ll"; then
        report "dense regime, $spec (tol $tol)" "$(compare "$tmp/g.ref" "$tmp/g.ll" 64 $tol)"
    else
        fail "dense regime, $spec: a run failed"
    fi
done

# 2. sparse regime, one attention layer, 8-block budget: p = 2 (mod 4) rows agree
if make_model sparse --seed 7 --idx-budget 32; then
    if run_ref "$tmp/sparse.hf" "$ids200" "$tmp/s.ref" && run_ref "$tmp/sparse.hf" "$ids200" "$tmp/sd.ref" --qsa-top-k 4096 &&
       run_llama "$tmp/sparse.gguf" "$ids200" "$tmp/s.ll"; then
        report "sparse regime (8 blocks, 200 tokens), rows p = 2 mod 4, numpy vs llama.cpp (tol $tol)" \
            "$(compare "$tmp/s.ref" "$tmp/s.ll" 200 $tol mod4=2)"
        v=$(compare "$tmp/sd.ref" "$tmp/s.ll" 200 1e-3 mod4=2)
        case $v in "BAD rel="*) pass "the dense reference differs from llama.cpp's pruned run (pruning in effect): $v" ;;
                   *) fail "the dense reference agrees with llama.cpp's pruned run: nothing was pruned ($v)" ;; esac
        echo "info: rows p != 2 mod 4 (llama.cpp takes 3 - |tail| cells of the 9th block there): $(compare "$tmp/s.ref" "$tmp/s.ll" 200 $tol mod4!=2)"
    else
        fail "sparse regime: a run failed"
    fi
    # 4. --qsa-top-k 8 on the budget-2048 directory is the budget-32 directory's run
    if [ -d "$tmp/dense.hf" ] && run_ref "$tmp/dense.hf" "$ids200" "$tmp/k.ref" --qsa-top-k 8 && cmp -s "$tmp/k.ref" "$tmp/s.ref"; then
        pass "--qsa-top-k 8 equals indexer_budget 32 in config.json (bit-identical)"
    else
        fail "--qsa-top-k 8 differs from indexer_budget 32"
    fi
fi

# 3. the tie rule: every block scores exactly 0.0
if make_model ties --seed 7 --zero-indexer-q; then
    if run_ref "$tmp/ties.hf" "$ids200" "$tmp/t.ref" --qsa-top-k 8 --dump-selection "$tmp/t.sel" &&
       run_ref "$tmp/ties.hf" "$ids200" "$tmp/th.ref" --qsa-top-k 8 --tie-rule highest --dump-selection "$tmp/th.sel"; then
        v=$($py - "$tmp/t.sel" "$tmp/th.sel" <<'PY'
import sys
def load(f):  # lines "layer pos b,b,..." (no blocks: nothing after the position)
    out = []
    for ln in open(f).read().splitlines():
        f_ = ln.split(' ')
        out.append((int(f_[1]), [int(x) for x in f_[2].split(',') if x] if len(f_) > 2 else []))
    return out
lo, hi = load(sys.argv[1]), load(sys.argv[2])
bad = [p for p, s in lo if s != list(range(min(8, (p + 1) // 4)))]
bad_hi = [p for p, s in hi if s != list(range(max(0, (p + 1) // 4 - 8), (p + 1) // 4))]
tied = sum(1 for p, s in lo if (p + 1) // 4 > 8)
print(("OK" if not bad and not bad_hi and tied else "BAD") +
      f" {tied} queries with more than 8 tied blocks select blocks 0..7 (wrong: {bad[:5]}), the reverse rule the last 8 (wrong: {bad_hi[:5]})")
PY
)
        report "tie rule, all block scores 0.0, lowest index first" "$v"
        v=$(compare "$tmp/th.ref" "$tmp/t.ref" 200 1e-3)
        case $v in "BAD rel="*) pass "breaking the ties the other way changes the logits: $v" ;;
                   *) fail "the tie rule does not reach the logits: $v" ;; esac
    else
        fail "tie case: a reference run failed"
    fi
fi
finish
