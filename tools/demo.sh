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
echo "demo: both files load and bind; next steps (generation, the server, the bank) arrive with later issues"
