#!/bin/sh
# demo.sh BUILD — what headstart can do today: make a tiny hybrid model in both file
# formats and inspect it. (It grows with the project: generation and the server come next.)
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
echo
echo "demo: model files, tokenizer, templates and the forward pass work; the server and the"
echo "session bank's request path arrive with the next issues"
