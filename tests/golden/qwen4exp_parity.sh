#!/bin/sh
# qwen4exp_parity.sh — headstart's Qwen3.8-Flash-Next (qwen4exp) forward pass and bank against
# two outside references, on tiny random models written by tools/ref/qwen4exp_mk.py (the
# independent python writer: one HF directory and one f32 GGUF with the same weights):
#   1. llama.cpp (prebuilt, npm) on the GGUF, where QSA is dense (a 64-token prompt under the
#      2048-token budget): `headstart logits --all` within 1e-3 of llama.cpp relative to the
#      largest |logit| (measured 8e-7), greedy continuation of 32 tokens identical; and a
#      2,050-token prompt (the longest that stays dense under the real 2048-token budget):
#      every row within 1e-3, every argmax the same;
#   2. the numpy float64 reference tools/ref/forward_qwen4exp.py on the HF directory, within
#      1e-4 (measured 2e-6): dense, and on a model whose budget is 8 blocks with a 200-token
#      prompt, where every query from position 35 on keeps 8 of its blocks; and that model
#      with zero indexer queries, so every block scores 0 and the tie rule (the lower block
#      first) decides every selection;
#   3. the HF directory and the GGUF give the same bits;
#   4. llama.cpp past the budget: it ranks cache cells, not blocks, and admits 3 - |open
#      block| cells of the next-best block (docs/MODELS.md §10). Checked as a fact about
#      llama.cpp, so a change on its side is noticed: equal to ours where the open block has
#      3 tokens (p = 2 mod 4), different at some other position;
#   5. the session bank (`headstart replay`, tests/golden/data/bank/head.json, a budget of 8
#      blocks so the head itself is attended sparsely): the second session restores from RAM
#      exactly at the head's end, and a second process from disk at least there, at positions
#      inside QSA blocks; first logits and output ids equal to --no-bank.
# Prints every measured error and ends with "RESULT: N passed, N failed". Run from the
# repository root with HEADSTART_BUILD set; needs make deps (numpy, node-llama-cpp, jq).
set -u
. "$(dirname "$0")/lib/llama.sh"
llama_setup

tmp=$(mktemp -d /tmp/hs-q4parity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }
llama_ids

# the vocabulary (and chat template) of mkmodel's tiny qwen35 tokenizer
"$hs" mkmodel --arch qwen35 --out "$tmp/tok.gguf" >/dev/null 2>&1 || { fail "mkmodel (tokenizer)"; finish; }
mk() { # NAME [writer flags]: $tmp/NAME (HF) and $tmp/NAME.gguf
    name=$1; shift
    $py tools/ref/qwen4exp_mk.py --tokenizer-gguf "$tmp/tok.gguf" --hf "$tmp/$name" --gguf "$tmp/$name.gguf" "$@" \
        > "$tmp/$name.log" 2>&1 || { fail "qwen4exp_mk.py $name"; cat "$tmp/$name.log"; finish; }
}
mk dense --seed 11
mk sparse --seed 12 --idx-budget 32
mk tie --seed 13 --idx-budget 32 --zero-indexer-q

# 1. llama.cpp, dense
if "$hs" logits -m "$tmp/dense.gguf" --ids "$ids_sp" --all --threads 2 -o "$tmp/dense.hs" 2>"$tmp/log" &&
    timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/dense.gguf" --tokens "$ids" --logits-out "$tmp/dense.ll" \
        $kv_flag >"$tmp/log" 2>&1; then
    v=$(llama_compare "$tmp/dense.hs" "$tmp/dense.ll" 1e-3)
    case $v in OK*) pass "llama.cpp logits, dense (tol 1e-3): $v" ;; *) fail "llama.cpp logits, dense: $v" ;; esac
    ours=$("$hs" run -m "$tmp/dense.gguf" --ids "$ids_sp" -n 32 --temp 0 2>"$tmp/log" | head -1) ||
        { fail "headstart run"; cat "$tmp/log"; }
    v=$(llama_greedy "$tmp/dense.gguf" 32 "$ours")
    case $v in OK*) pass "llama.cpp greedy, dense: $v" ;; *) fail "llama.cpp greedy, dense: $v" ;; esac
else
    fail "logits (headstart or llama.cpp), dense"; cat "$tmp/log"
fi
# ... and a 2,050-token prompt, the longest whose every query is still dense (the real model's
# budget, 2048 tokens = 512 blocks): every row within 1e-3 and the same argmax
long_ids=$($py -c "import random; random.seed(9); print(','.join(str(random.randrange(0, 600)) for _ in range(2050)))")
if "$hs" logits -m "$tmp/dense.gguf" --ids "$(echo "$long_ids" | tr ',' ' ')" --all --threads 2 -o "$tmp/long.hs" 2>"$tmp/log" &&
    timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/dense.gguf" --tokens "$long_ids" --logits-out "$tmp/long.ll" \
        $kv_flag >"$tmp/log" 2>&1; then
    v=$($py - "$tmp/long.hs" "$tmp/long.ll" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], '<f4').reshape(2050, -1); b = np.fromfile(sys.argv[2], '<f4').reshape(2050, -1)
rel = np.abs(a - b).max() / np.abs(b).max()
same = int((a.argmax(1) == b.argmax(1)).sum())
print(("OK" if rel <= 1e-3 and same == 2050 else "BAD") + " rel=%.2e argmax_equal=%d/2050" % (rel, same))
PY
)
    case $v in OK*) pass "llama.cpp logits, 2,050 dense tokens: $v" ;; *) fail "llama.cpp logits, 2,050 dense tokens: $v" ;; esac
else
    fail "logits (headstart or llama.cpp), 2,050 tokens"; cat "$tmp/log"
fi

# 2 + 3. the numpy reference, dense and sparse; HF = GGUF
sparse_ids=$($py -c "import random; random.seed(5); print(','.join(str(random.randrange(0, 600)) for _ in range(200)))")
for name in dense sparse tie; do
    if [ $name = dense ]; then i=$ids; else i=$sparse_ids; fi
    isp=$(echo "$i" | tr ',' ' ')
    if ! "$hs" logits -m "$tmp/$name.gguf" --ids "$isp" --all --threads 2 -o "$tmp/$name.g" 2>"$tmp/log" ||
        ! "$hs" logits -m "$tmp/$name" --ids "$isp" --all -o "$tmp/$name.h" 2>>"$tmp/log" ||
        ! $py tools/ref/forward_qwen4exp.py "$tmp/$name" "$i" "$tmp/$name.ref" 2>>"$tmp/log"; then
        fail "logits $name"; cat "$tmp/log"; continue
    fi
    if cmp -s "$tmp/$name.g" "$tmp/$name.h"; then pass "$name: HF directory and GGUF give the same bits"
    else fail "$name: HF and GGUF logits differ"; fi
    v=$($py - "$tmp/$name.g" "$tmp/$name.ref" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], '<f4'); b = np.fromfile(sys.argv[2], '<f4')
rel = np.abs(a - b).max() / np.abs(b).max()
print(("OK" if a.shape == b.shape and rel <= 1e-4 else "BAD") + " rel=%.2e" % rel)
PY
)
    case $v in OK*) pass "numpy reference, $name (tol 1e-4): $v" ;; *) fail "numpy reference, $name: $v" ;; esac
done

# 4. llama.cpp past the budget: partial blocks
if timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/sparse.gguf" --tokens "$ids" --logits-out "$tmp/sparse.ll" \
        $kv_flag >"$tmp/log" 2>&1 &&
    "$hs" logits -m "$tmp/sparse.gguf" --ids "$ids_sp" --all --threads 2 -o "$tmp/sparse64.hs" 2>>"$tmp/log"; then
    v=$($py - "$tmp/sparse64.hs" "$tmp/sparse.ll" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], '<f4').reshape(64, -1); b = np.fromfile(sys.argv[2], '<f4').reshape(64, -1)
s = np.abs(b).max()
err = np.abs(a - b).max(1) / s
full_tail = [p for p in range(35, 64) if p % 4 == 2]
others = [p for p in range(35, 64) if p % 4 != 2]
ok = err[:35].max() <= 1e-4 and err[full_tail].max() <= 1e-4 and err[others].max() > 1e-4
print(("OK" if ok else "BAD") + " dense part %.1e, open block of 3 %.1e, other positions up to %.1e"
      % (err[:35].max(), err[full_tail].max(), err[others].max()))
PY
)
    case $v in OK*) pass "llama.cpp past the budget admits partial blocks: $v" ;;
        *) fail "llama.cpp past the budget (expected: equal where the open block has 3 tokens, else not): $v" ;; esac
else
    fail "llama.cpp or headstart on the sparse model"; cat "$tmp/log"
fi

# 5. the bank, RAM and disk, on the sparse model
head_json=tests/golden/data/bank/head.json
req() {
    jq -c --arg u "$1" '{api: "openai", body: {model: "any", max_tokens: 6, tools: .tools,
        messages: [{role: "system", content: .system}, {role: "user", content: $u}]}}' "$head_json"
}
{ req "Find every TODO in src/ and list them."; req "Explain what the cache module does, briefly."; } > "$tmp/r.jsonl"
req "Explain what the cache module does, briefly." > "$tmp/b.jsonl"
m=$tmp/sparse.gguf
if "$hs" replay --no-bank-disk -m "$m" --requests "$tmp/r.jsonl" --no-bank --threads 2 > "$tmp/ref.out" 2>"$tmp/log" &&
    "$hs" replay --bank-dir "$tmp/bank" -m "$m" --requests "$tmp/r.jsonl" --threads 2 > "$tmp/ram.out" 2>>"$tmp/log" &&
    "$hs" replay --bank-dir "$tmp/bank" -m "$m" --requests "$tmp/b.jsonl" --threads 2 > "$tmp/disk.out" 2>>"$tmp/log"; then
    key() { sed -n "$2p" "$1" | jq -c '[.first_logits_sha256, .output_ids]'; }
    for run in "ram.out 2 2 ram" "disk.out 1 2 disk"; do
        set -- $run
        c=$(sed -n "$2p" "$tmp/$1" | jq .cached_tokens); src=$(sed -n "$2p" "$tmp/$1" | jq -r .cache_source)
        h=$(sed -n "$2p" "$tmp/$1" | jq .head_tokens)
        # RAM: exactly at the head's end; disk (a new process): at least there (its deepest entry)
        if [ "$src" = "$4" ] && [ "$h" -gt 1000 ] && { [ "$c" = "$h" ] || { [ "$4" = disk ] && [ "$c" -ge "$h" ]; }; } &&
            [ "$(key "$tmp/$1" "$2")" = "$(key "$tmp/ref.out" "$3")" ]; then
            pass "bank: session B restored $c tokens from $4 (head $h; position mod 4 = $((c % 4))), first logits and output = --no-bank"
        else
            fail "bank ($4): cached $c from $src (head $h), $(key "$tmp/$1" "$2") vs $(key "$tmp/ref.out" "$3")"
        fi
    done
else
    fail "replay"; tail -5 "$tmp/log"
fi
finish
