#!/bin/sh
# demo.sh BUILD — what headstart does, on a tiny random model: make it in both file formats,
# inspect it, render a real-shaped agent request through its chat template, generate, then
# run the server and send two agent sessions that share a head: the second restores the
# head from the session bank instead of recomputing it.
set -eu
build=${1:-build}
hs=$build/headstart
out=$build/demo
rm -rf "$out"
mkdir -p "$out"
echo "== headstart mkmodel: a tiny Qwen3.5-style hybrid model (3 GDN layers + 1 attention layer)"
$hs mkmodel --arch qwen35 --preset tiny --seed 1 --out "$out/tiny-hf"
$hs mkmodel --arch qwen35 --preset tiny --seed 1 --dtype q8_0 --out "$out/tiny-q8_0.gguf"
ls -l "$out/tiny-hf" "$out/tiny-q8_0.gguf"
echo
echo "== headstart inspect $out/tiny-hf (Hugging Face directory)"
$hs inspect "$out/tiny-hf"
echo
echo "== headstart inspect $out/tiny-q8_0.gguf (GGUF, as llama.cpp writes it)"
$hs inspect "$out/tiny-q8_0.gguf"
echo
req=tests/golden/data/requests/anthropic_claude_code.json
echo "== headstart render: a Claude-Code-shaped /v1/messages request through the model's chat template"
$hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic | head -c 600
echo "..."
echo "prompt tokens: $($hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic --ids | wc -w)," \
     "head (system + tools, shared by sessions): $($hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic --head) tokens"
echo
echo "== headstart run --chat (random weights, so the words are noise; the timings are real)"
$hs run -m "$out/tiny-q8_0.gguf" --chat "What does a session bank keep?" -n 24 --temp 0 --ignore-eos

# ---- the server and the bank: two agent sessions sharing one head ------------------------
echo
echo "== headstart serve: two agent sessions with the same system text + tools, different questions"
log=$out/serve.log
$hs serve -m "$out/tiny-q8_0.gguf" --host 127.0.0.1 --port 0 --threads 2 --bank-dir "$out/bank" >"$log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT INT TERM
port=
i=0
while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || { echo "demo: the server did not start:"; cat "$log"; exit 1; }
grep "listening on" "$log"
req=tests/golden/data/requests/openai_agent.json
for q in "Fix the second one." "Explain the first one instead."; do
    /usr/bin/python3 - "$req" "$q" > "$out/body.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1])); b["messages"] = b["messages"][:2]
b["messages"][1]["content"] = sys.argv[2]; b["stream"] = False; b["max_tokens"] = 16; b["temperature"] = 0
print(json.dumps(b))
PY
    curl -s -X POST "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
        --data-binary @"$out/body.json" > "$out/resp.json"
    /usr/bin/python3 - "$out/resp.json" "$q" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); u = r.get("usage", {})
cached = u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
print(f'session "{sys.argv[2]}": prompt {u.get("prompt_tokens")} tokens, reused from the bank {cached}, '
      f'computed {u.get("prompt_tokens", 0) - cached}')
PY
done
kill $srv 2>/dev/null
wait $srv 2>/dev/null || true
echo "the second session restored the whole head (system text + tools) from the bank instead of"
echo "recomputing it; its answer is bit-identical to computing it cold (tests/e2e/server_bank.sh)"
