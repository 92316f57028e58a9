#!/bin/sh
# tok_248k.sh — a tokenizer the size of the real Qwen3.5/3.6/3.8 one (248,320 entries,
# 247,587 merges, pre-tokenizer qwen35; tests/golden/data/tok_248k_gen.py makes it) end to
# end, so nothing may assume the 151,936-entry Qwen2/Qwen3 vocabulary:
#   1. our tokenizer on the file equals Hugging Face tokenizers (the Rust library) on a
#      corpus that reaches ids above 151,936 and the added tokens from 248,044;
#   2. mkmodel --tokenizer writes a GGUF (qwen35, 248,320 tokens) and an HF directory;
#      inspect reports 248,320 tokens and 247,587 merges; tokenize on both equals the
#      reference; detokenize(tokenize(x)) == x; render gives the same ids on both, with
#      <|im_start|> = 248,045;
#   3. llama.cpp loads the GGUF: its own tokenizer gives our ids for the same text, it has
#      248,320 logits per position, and headstart's logits match its (f32, 1e-3 of the
#      largest |logit|, as engine_parity.sh);
#   4. headstart run generates from it.
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
. "$(dirname "$0")/lib/llama.sh"
tmp=$(mktemp -d /tmp/hs-tok248k.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

[ -x "$hs" ] && [ -f "$build/libheadstart.a" ] || { fail "$hs / libheadstart.a not built"; finish; }
tj=$tmp/tokenizer.json
$py tests/golden/data/tok_248k_gen.py "$tj" || { fail "generating the tokenizer"; finish; }
pass "tokenizer.json: $($py -c 'import json,sys; j=json.load(open(sys.argv[1])); print(len(j["model"]["vocab"]), "ids,", len(j["model"]["merges"]), "merges")' "$tj")"

# ---- 1. against HF tokenizers -------------------------------------------------------------
drv=$tmp/tok_encode
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Isrc tests/golden/tok_encode.c "$build/libheadstart.a" \
    -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o "$drv" || { fail "tok_encode does not build"; finish; }
corpus=$tmp/corpus.txt
text='Hello wörld — the cache is 中文 🙂, ids 12345.  <think>x</think> end'
# the first ~60 KB of the corpus, cut at a chunk boundary (never inside a character)
$py -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(d[:d.rfind(b"\n<<<CHUNK>>>\n", 0, 60000)])' \
    tests/golden/data/tokenizer_corpus.txt > "$corpus"
printf '\n<<<CHUNK>>>\n%s' "<|im_start|>user
Hello <|extra_100|> and <think>x</think><|im_end|>
<|endoftext|><|extra_275|>" >> "$corpus"
printf '\n<<<CHUNK>>>\n' >> "$corpus"
node tools/tok_ref.mjs --unicode-corpus | $py -c 'import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[:d.rfind(b"\n<<<CHUNK>>>\n", 0, 30000)])' >> "$corpus"
printf '\n<<<CHUNK>>>\n%s' "$text" >> "$corpus"
if node tools/tok_ref.mjs --engine hf --tokenizer "$tj" "$corpus" > "$tmp/ref.txt" 2> "$tmp/ref.log"; then
    out2=$("$drv" --check "$tmp/ref.txt" "$tj" "$corpus" 2>&1)
    high=$(tr ' ' '\n' < "$tmp/ref.txt" | awk '$1 >= 151936 && $1 < 248044' | wc -l)
    added=$(tr ' ' '\n' < "$tmp/ref.txt" | awk '$1 >= 248044' | sort -u | wc -l)
    if echo "$out2" | grep -q '^chunks: [1-9][0-9]* ok, 0 mismatched$' && [ "$high" -gt 100 ] && [ "$added" -ge 6 ]; then
        pass "encode equals HF tokenizers: $(echo "$out2" | tail -1); $high ids in 151,936..248,043, $added added ids >= 248,044"
    else
        fail "encode vs HF tokenizers: $(echo "$out2" | tail -1), $high high ids, $added added ids"; echo "$out2" | head -8
    fi
else
    cat "$tmp/ref.log"; fail "HF tokenizers reference failed"
fi
rt=$("$drv" --roundtrip --no-nfc "$tj" "$corpus" 2>&1 | grep '^roundtrip')
case $rt in "roundtrip: "*" ok, 0 failed") pass "decode(encode(x)) == x, stream == one-shot: $rt" ;; *) fail "round trip: $rt" ;; esac

# ---- 2. mkmodel, inspect, tokenize, detokenize, render -------------------------------------
"$hs" mkmodel --arch qwen35 --tokenizer "$tj" --dtype f32 --layers 4 --seed 5 --out "$tmp/m.gguf" > "$tmp/mk.log" 2>&1 &&
"$hs" mkmodel --arch qwen35 --tokenizer "$tj" --dtype bf16 --layers 4 --seed 5 --out "$tmp/hf" >> "$tmp/mk.log" 2>&1 ||
    { cat "$tmp/mk.log"; fail "mkmodel --tokenizer"; finish; }
for m in m.gguf hf; do
    v=$("$hs" inspect "$tmp/$m" --json | $py -c 'import json,sys; j=json.load(sys.stdin); t=j["tokenizer"]; print(j["hparams"]["n_vocab"], t.get("n_tokens"), t.get("n_merges"), t.get("pre", "-"))' 2>&1)
    case "$m $v" in
        "m.gguf 248320 248320 247587 qwen35"|"hf 248320 248320 247587 -") pass "$m: inspect: n_vocab, tokens, merges, pre = $v" ;;
        *) fail "$m: inspect says $v" ;;
    esac
done
printf '%s' "$text" > "$tmp/text.txt"
ref=$(tail -1 "$tmp/ref.txt")  # the last chunk of the corpus is $text
for m in m.gguf hf; do
    ours=$("$hs" tokenize -m "$tmp/$m" --file "$tmp/text.txt" 2>&1)
    if [ -n "$ours" ] && [ "$ours" = "$ref" ]; then pass "$m: tokenize equals HF tokenizers ($(echo "$ours" | wc -w) ids)"
    else fail "$m: tokenize: ours '$ours', HF '$ref'"; fi
    back=$("$hs" detokenize -m "$tmp/$m" --ids "$ours" 2>&1; printf x)
    if [ "${back%x}" = "$text" ]; then pass "$m: detokenize round trip"; else fail "$m: detokenize gave '${back%x}'"; fi
done
req=tests/golden/data/requests/openai_agent.json
a=$("$hs" render -m "$tmp/m.gguf" --request "$req" --api openai --ids 2>&1)
b=$("$hs" render -m "$tmp/hf" --request "$req" --api openai --ids 2>&1)
first=$(echo "$a" | cut -d' ' -f1)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$first" = 248045 ]; then pass "render: GGUF and HF give the same $(echo "$a" | wc -w) ids, starting <|im_start|> = 248045"
else fail "render: first id '$first', GGUF and HF $( [ "$a" = "$b" ] && echo agree || echo differ)"; fi

# ---- 3. llama.cpp ----------------------------------------------------------------------------
llama_setup # the llama.cpp checks, headers and tools/llama_eval
prompt="<|im_start|>user
$text<|im_end|>
<|im_start|>assistant
"
if timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/m.gguf" --prompt "$prompt" --threads 1 --kv-f32 \
        --logits-out "$tmp/ll.f32" > "$tmp/ll.log" 2>&1; then
    ll_ids=$(sed -n 's/^tokens [0-9]*: //p' "$tmp/ll.log")
    ours=$("$hs" tokenize -m "$tmp/m.gguf" --text "$prompt" 2>&1)
    if [ -n "$ours" ] && [ "$ll_ids" = "$ours" ]; then pass "llama.cpp's tokenizer gives our $(echo "$ours" | wc -w) ids"
    else fail "llama.cpp tokenizes to '$ll_ids', we to '$ours'"; fi
    if grep -q '^n_vocab 248320$' "$tmp/ll.log"; then pass "llama.cpp: n_vocab 248320, $(grep '^ok:' "$tmp/ll.log")"
    else fail "llama.cpp: $(grep -E '^n_vocab|^ok' "$tmp/ll.log")"; fi
    if "$hs" logits -m "$tmp/m.gguf" --ids "$ll_ids" --all --threads 2 -o "$tmp/hs.f32" 2> "$tmp/lg.log"; then
        v=$($py - "$tmp/hs.f32" "$tmp/ll.f32" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype='<f4').astype(np.float64); b = np.fromfile(sys.argv[2], dtype='<f4').astype(np.float64)
if a.size != b.size or a.size % 248320: print(f"BAD sizes {a.size} vs {b.size}"); sys.exit()
a = a.reshape(-1, 248320); b = b.reshape(-1, 248320)
d = float(np.abs(a - b).max()); s = float(np.abs(b).max()); rel = d / s
am = int((a.argmax(1) == b.argmax(1)).sum())
print(("OK" if rel <= 1e-3 and np.isfinite(a).all() else "BAD") + f" rel={rel:.2e} rows={a.shape[0]} argmax_equal={am}/{a.shape[0]}")
PY
)
        case $v in OK*) pass "logits equal llama.cpp's (f32): $v" ;; *) fail "logits vs llama.cpp: $v" ;; esac
    else
        cat "$tmp/lg.log"; fail "headstart logits"
    fi
else
    tail -5 "$tmp/ll.log"; fail "llama.cpp does not load the 248,320-token GGUF"
fi

# ---- 4. generation ---------------------------------------------------------------------------
out=$("$hs" run -m "$tmp/m.gguf" --chat "Say hi." -n 8 --temp 0 --ignore-eos --json 2>&1)
n=$(echo "$out" | $py -c 'import json,sys; j=json.load(sys.stdin); assert all(0 <= i < 248320 for i in j["ids"]); print(len(j["ids"]))' 2>/dev/null)
if [ "${n:-0}" = 8 ]; then pass "run: 8 tokens generated"; else fail "run: $out"; fi
finish
