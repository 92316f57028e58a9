#!/bin/sh
# server_basic.sh — `headstart serve` end to end with curl on a tiny random model
# (headstart mkmodel): /, /health, /v1/models in both shapes, non-streaming and streaming
# OpenAI chat and Anthropic messages (JSON fields, usage numbers, SSE framing, [DONE] /
# message_stop), count_tokens, an image inside a tool result (a placeholder, counted), the error statuses and shapes (400 with the JSON position, a
# bad field, a prompt over the context; 401, 404, 405, 413, 429 with Retry-After), a client disconnect mid-stream (the engine stops
# early and the server keeps serving), /metrics, stop strings (OpenAI `stop`, Anthropic
# `stop_sequences`, streamed and not: the text ends before the string), tool_choice (unknown
# name 400, none, a forced named call), keep-alives during a long prefill, a disconnect during
# one (/metrics counts a cancel at stage prefill with the prompt tokens it left; the next
# request is answered), and SIGTERM (idle: exit 0; busy: the running stream ends with an
# error event, a queued request gets 503, exit 0).
# Servers listen on 127.0.0.1 with --port 0 (the start line names the port) and are killed
# at the end (tests/e2e/lib/server.sh). Every wait is a bounded loop. Ends with
# "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup server-basic curl
ct="Content-Type: application/json" # every POST body is JSON (the server refuses others: 415)

# sse FILE openai|anthropic — well-formed SSE in the API's framing; prints the text
sse() {
    $py - "$1" "$2" <<'EOF'
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
events = [e for e in raw.split("\n\n") if e.strip()]
assert raw.endswith("\n\n"), "stream does not end with a blank line"
text = ""
if sys.argv[2] == "openai":
    assert events[-1] == "data: [DONE]", events[-1]
    usage = None
    for e in events[:-1]:
        if e.startswith(":"):
            continue
        assert e.startswith("data: ") and "\n" not in e, e
        c = json.loads(e[6:])
        assert c["object"] == "chat.completion.chunk"
        if c.get("usage"):
            usage = c["usage"]
        for ch in c["choices"]:
            text += ch["delta"].get("content") or ""
            text += ch["delta"].get("reasoning_content") or ""
    assert usage and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
else:
    names = []
    for e in events:
        lines = e.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), e
        d = json.loads(lines[1][6:])
        assert d["type"] == lines[0][7:], e
        names.append(d["type"])
        if d["type"] == "content_block_delta":
            text += d["delta"].get("text", "") + d["delta"].get("thinking", "")
    assert names[0] == "message_start" and names[-1] == "message_stop", names
    assert "message_delta" in names
print(len(text))
EOF
}

key=test-key-123
e2e_start "$tmp/a.log" --no-bank-disk --api-key "$key" --max-body 64K --ctx 2048
base=http://127.0.0.1:$port
apid=$pid
auth="Authorization: Bearer $key"
grep -q "context 2048, threads 1, kernels" "$tmp/a.log" && pass "start line" || fail "start line: $(cat "$tmp/a.log")"

# code METHOD PATH OUTFILE [curl args] — prints the status
code() { m=$1; p=$2; o=$3; shift 3; curl -s -H "$ct" -o "$o" -w '%{http_code}' -X "$m" "$@" "$base$p"; }
# answered OUTFILE TRIES — POST $chat until it is answered 200, at most TRIES times 50 ms
# apart; sets $st (the last status) and $i (the tries)
answered() {
    st=0 i=0
    while [ $i -lt "$2" ] && [ "$st" != 200 ]; do
        st=$(curl -s -H "$ct" -o "$1" -w '%{http_code}' -d "$chat" "$base/v1/chat/completions")
        [ "$st" = 200 ] || sleep 0.05
        i=$((i + 1))
    done
}

[ "$(code GET /health "$tmp/h" )" = 200 ] && check "$tmp/h" 'j["status"] == "ok" and j["queue_depth"] == 0' \
    && pass "/health" || fail "/health: $(cat "$tmp/h")"
[ "$(curl -s -H "$ct" -o /dev/null -w '%{http_code}' -I "$base/")" = 200 ] && [ "$(code GET / "$tmp/r")" = 200 ] \
    && pass "HEAD / and GET /" || fail "HEAD / or GET /"
[ "$(code GET /v1/models "$tmp/mo" -H "$auth")" = 200 ] && check "$tmp/mo" 'j["object"] == "list" and j["data"][0]["id"] == "m" and j["data"][0]["object"] == "model"' \
    && pass "/v1/models (OpenAI)" || fail "/v1/models OpenAI: $(cat "$tmp/mo")"
[ "$(code GET /v1/models "$tmp/ma" -H "x-api-key: $key" -H 'anthropic-version: 2023-06-01')" = 200 ] \
    && check "$tmp/ma" 'j["data"][0]["type"] == "model" and j["has_more"] is False and j["first_id"] == "m"' \
    && pass "/v1/models (Anthropic, x-api-key)" || fail "/v1/models Anthropic: $(cat "$tmp/ma")"

chat='{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"max_tokens":12,"temperature":0,"seed":7}'
msgs='{"model":"m","max_tokens":12,"system":"Be brief.","messages":[{"role":"user","content":"Hello there"}],"temperature":0}'

st=$(code POST /v1/chat/completions "$tmp/c1" -H "$auth" -H 'Content-Type: application/json' -d "$chat")
[ "$st" = 200 ] && check "$tmp/c1" 'j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-") and j["model"] == "m"
    and j["choices"][0]["message"]["role"] == "assistant" and j["choices"][0]["finish_reason"] in ("stop", "length")
    and j["usage"]["prompt_tokens"] > 0 and 0 < j["usage"]["completion_tokens"] <= 12
    and j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"]' \
    && pass "chat completion (non-stream)" || fail "chat completion: $st $(cat "$tmp/c1")"
st=$(code POST /v1/chat/completions "$tmp/c2" -H "$auth" -d "$chat")
cmp -s "$tmp/c1" "$tmp/c2" && fail "two responses are byte-identical (ids must differ)" || {
    check "$tmp/c1" 'True' && $py -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); u=lambda j: {k: v for k, v in j["usage"].items() if k != "prompt_tokens_details"}
sys.exit(0 if a["choices"]==b["choices"] and u(a)==u(b) else 1)' "$tmp/c1" "$tmp/c2" \
    && pass "temperature 0 answers repeat" || fail "temperature 0 answers differ: $(cat "$tmp/c1") $(cat "$tmp/c2")"; }

st=$(code POST '/v1/messages?beta=true' "$tmp/a1" -H "x-api-key: $key" -H 'anthropic-version: 2023-06-01' -d "$msgs")
[ "$st" = 200 ] && check "$tmp/a1" 'j["type"] == "message" and j["id"].startswith("msg_") and j["role"] == "assistant"
    and isinstance(j["content"], list) and j["stop_reason"] in ("end_turn", "max_tokens")
    and j["usage"]["input_tokens"] > 0 and 0 < j["usage"]["output_tokens"] <= 12' \
    && pass "messages (non-stream, ?beta=true)" || fail "messages: $st $(cat "$tmp/a1")"
st=$(code POST /v1/messages/count_tokens "$tmp/ct" -H "x-api-key: $key" -d "$msgs")
[ "$st" = 200 ] && $py -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); u=b["usage"]; sys.exit(0 if a["input_tokens"]==u["input_tokens"]+u.get("cache_read_input_tokens",0) > 0 else 1)' "$tmp/ct" "$tmp/a1" \
    && pass "count_tokens equals the messages input tokens (uncached + cache read)" || fail "count_tokens: $st $(cat "$tmp/ct")"

s1=$(echo "$chat" | sed 's/"max_tokens":12/"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}/')
curl -s -H "$ct" -N -o "$tmp/s1" -D "$tmp/s1.h" -H "$auth" -d "$s1" "$base/v1/chat/completions"
grep -qi '^content-type: text/event-stream' "$tmp/s1.h" && n=$(sse "$tmp/s1" openai) \
    && pass "chat completion stream (SSE, usage chunk, [DONE]; $n chars)" || fail "chat stream: $(head -c 600 "$tmp/s1")"
s2=$(echo "$msgs" | sed 's/"max_tokens":12/"max_tokens":12,"stream":true/')
curl -s -H "$ct" -N -o "$tmp/s2" -H "x-api-key: $key" -d "$s2" "$base/v1/messages"
n=$(sse "$tmp/s2" anthropic) && pass "messages stream (event names, message_start .. message_stop; $n chars)" \
    || fail "messages stream: $(head -c 600 "$tmp/s2")"

# errors, each in its API's shape
oa_err='j["error"]["type"] == "invalid_request_error" and isinstance(j["error"]["message"], str)'
an_err='j["type"] == "error" and isinstance(j["error"]["type"], str)'
st=$(code POST /v1/chat/completions "$tmp/e1" -H "$auth" -d '{"model":"m","messages":[')
[ "$st" = 400 ] && check "$tmp/e1" "$oa_err"' and "line 1" in j["error"]["message"]' && pass "400 malformed JSON (OpenAI, position)" || fail "400: $st $(cat "$tmp/e1")"
st=$(code POST /v1/messages "$tmp/e2" -H "$auth" -d '{"model":"m",,}')
[ "$st" = 400 ] && check "$tmp/e2" "$an_err"' and j["error"]["type"] == "invalid_request_error" and "column" in j["error"]["message"]' \
    && pass "400 malformed JSON (Anthropic)" || fail "400 anthropic: $st $(cat "$tmp/e2")"
st=$(code POST /v1/chat/completions "$tmp/e3" -H "$auth" -d '{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"}')
[ "$st" = 400 ] && check "$tmp/e3" "$oa_err"' and "temperature" in j["error"]["message"]' && pass "400 names a bad field" || fail "400 field: $st $(cat "$tmp/e3")"
st=$(code POST /v1/chat/completions "$tmp/e4" -H "$auth" -d '[1,2]')
[ "$st" = 400 ] && check "$tmp/e4" "$oa_err" && pass "400 non-object body" || fail "400 array: $st $(cat "$tmp/e4")"
st=$(code POST /v1/chat/completions "$tmp/e5" -d "$chat")
[ "$st" = 401 ] && check "$tmp/e5" 'j["error"]["code"] == "invalid_api_key"' && pass "401 without a key (OpenAI)" || fail "401: $st $(cat "$tmp/e5")"
st=$(code POST /v1/messages "$tmp/e6" -H "x-api-key: wrong" -d "$msgs")
[ "$st" = 401 ] && check "$tmp/e6" "$an_err"' and j["error"]["type"] == "authentication_error"' && pass "401 wrong key (Anthropic)" || fail "401 anthropic: $st $(cat "$tmp/e6")"
st=$(code GET /v1/nothing "$tmp/e7" -H "$auth")
[ "$st" = 404 ] && check "$tmp/e7" "$oa_err" && pass "404 unknown route" || fail "404: $st $(cat "$tmp/e7")"
st=$(code POST /v1/messages/nothing "$tmp/e8" -H "$auth" -d '{}')
[ "$st" = 404 ] && check "$tmp/e8" "$an_err"' and j["error"]["type"] == "not_found_error"' && pass "404 under /v1/messages (Anthropic)" || fail "404 anthropic: $st $(cat "$tmp/e8")"
st=$(curl -s -H "$ct" -o "$tmp/e9" -D "$tmp/e9.h" -w '%{http_code}' -H "$auth" "$base/v1/chat/completions")
[ "$st" = 405 ] && grep -qi '^allow: POST' "$tmp/e9.h" && check "$tmp/e9" "$oa_err" && pass "405 wrong method (Allow)" || fail "405: $st $(cat "$tmp/e9")"
$py -c 'import json; print(json.dumps({"model":"m","messages":[{"role":"user","content":"x"*100000}]}))' > "$tmp/big.json"
st=$(code POST /v1/chat/completions "$tmp/e10" -H "$auth" --data-binary "@$tmp/big.json")
[ "$st" = 413 ] && check "$tmp/e10" '"larger than" in j["error"]["message"]' && pass "413 body over --max-body" || fail "413: $st $(cat "$tmp/e10")"
st=$(code POST /v1/messages "$tmp/e11" -H "$auth" -H 'Expect:' -H 'Transfer-Encoding: chunked' --data-binary "@$tmp/big.json")
[ "$st" = 413 ] && check "$tmp/e11" "$an_err"' and j["error"]["type"] == "request_too_large"' && pass "413 chunked body (Anthropic)" || fail "413 chunked: $st $(cat "$tmp/e11")"
$py -c 'import json; print(json.dumps({"model":"m","stream":True,"messages":[{"role":"user","content":"zq "*3000}]}))' > "$tmp/long.json"
st=$(code POST /v1/chat/completions "$tmp/e12" -H "$auth" --data-binary "@$tmp/long.json")
[ "$st" = 400 ] && check "$tmp/e12" "$oa_err"' and j["error"]["code"] == "context_length_exceeded"
    and re.search(r"maximum context length is 2048 tokens\. However, your messages resulted in \d+ tokens", j["error"]["message"])' \
    && pass "400 context_length_exceeded in OpenAI's wording (stream request)" || fail "context: $st $(cat "$tmp/e12")"
$py -c 'import json; print(json.dumps({"model":"m","max_tokens":8,"stream":True,"messages":[{"role":"user","content":"zq "*3000}]}))' > "$tmp/long_a.json"
st=$(code POST /v1/messages "$tmp/e13" -H "x-api-key: $key" --data-binary "@$tmp/long_a.json")
[ "$st" = 400 ] && check "$tmp/e13" "$an_err"' and j["error"]["type"] == "invalid_request_error"
    and re.match(r"prompt is too long: (\d+) tokens > 2048 maximum", j["error"]["message"])
    and int(re.match(r"prompt is too long: (\d+)", j["error"]["message"]).group(1)) >= 2048' \
    && pass "400 'prompt is too long: N tokens > M maximum' (Anthropic, stream request)" || fail "context anthropic: $st $(cat "$tmp/e13")"
st=$(code GET /health "$tmp/h2")
[ "$st" = 200 ] && pass "still serving after the errors" || fail "health after errors: $st"

# queue full and disconnect: with --parallel 1, --max-queue 0 accepts a request only while
# the engine is idle.
e2e_start "$tmp/b.log" --no-bank-disk --parallel 1 --max-queue 0 --ctx 16384 --max-tokens-default 0
base=http://127.0.0.1:$port
bpid=$pid
long='{"model":"m","messages":[{"role":"user","content":"go"}],"stream":true,"ignore_eos":true,"max_tokens":16000}'
curl -s -H "$ct" -N -o "$tmp/long" -d "$long" "$base/v1/chat/completions" &
cpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q chatcmpl "$tmp/long" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
st=$(curl -s -H "$ct" -o "$tmp/q" -D "$tmp/q.h" -w '%{http_code}' -d "$chat" "$base/v1/chat/completions")
[ "$st" = 429 ] && grep -qi '^retry-after: ' "$tmp/q.h" && check "$tmp/q" 'j["error"]["code"] == "rate_limit_exceeded"' \
    && pass "429 queue full, Retry-After" || fail "429: $st $(cat "$tmp/q")"
kill "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
answered "$tmp/after" 100
[ "$st" = 200 ] && check "$tmp/after" 'j["object"] == "chat.completion"' && pass "a request after a client disconnect ($i tries)" || fail "after disconnect: $st"
curl -s -H "$ct" -o "$tmp/metrics" "$base/metrics"
gen=$(sed -n 's/^headstart_generated_tokens_total \([0-9]*\)$/\1/p' "$tmp/metrics")
[ -n "$gen" ] && [ "$gen" -lt 15000 ] && pass "the disconnected stream stopped early ($gen tokens generated in all)" || fail "cancel: generated '$gen'"
grep -q -E '^headstart_requests_total\{route="/v1/chat/completions",status="4xx"\} [1-9]' "$tmp/metrics" \
    && grep -q '^headstart_queue_depth 0$' "$tmp/metrics" && grep -q 'headstart_ttft_seconds_count' "$tmp/metrics" \
    && grep -q '^headstart_cancelled_requests_total{stage="generation"} 1$' "$tmp/metrics" \
    && grep -q '^headstart_cancelled_requests_total{stage="prefill"} 0$' "$tmp/metrics" \
    && pass "/metrics (requests, queue depth, ttft, the stream cancelled in generation)" || fail "metrics: $(cat "$tmp/metrics")"

# an image a tool returned (Claude Code's Read of a PNG) is a placeholder, not a 400; the same
# image at the top level of a user turn still is; /metrics counts the placeholder
img='{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}'
tmsgs='{"model":"m","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":"Read a.png"},
 {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"a.png"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":['"$img"']}]}]}'
st=$(code POST /v1/messages "$tmp/ti" -H "x-api-key: $key" -H 'Content-Type: application/json' -d "$tmsgs")
curl -s -o "$tmp/metrics2" "$base/metrics"
[ "$st" = 200 ] && check "$tmp/ti" 'j["type"] == "message"' \
    && grep -q '^headstart_tool_media_placeholders_total 1$' "$tmp/metrics2" \
    && pass "an image inside a tool_result becomes a placeholder (200, counted in /metrics)" \
    || fail "tool_result image: $st $(cat "$tmp/ti") $(grep media "$tmp/metrics2")"
st=$(code POST /v1/messages "$tmp/ui" -H "x-api-key: $key" -H 'Content-Type: application/json' \
    -d '{"model":"m","max_tokens":4,"messages":[{"role":"user","content":['"$img"']}]}')
[ "$st" = 400 ] && check "$tmp/ui" "$an_err"' and "image blocks are not supported" in j["error"]["message"]' \
    && pass "a top-level user image is still a 400" || fail "user image: $st $(cat "$tmp/ui")"

# stop strings: a greedy answer, then the same request with a stop string taken from its
# middle ends right before it (non-stream and stream, both APIs); tool_choice; bad values 400
base=http://127.0.0.1:$port
nothink='"chat_template_kwargs":{"enable_thinking":false}'
sq='{"model":"m","messages":[{"role":"user","content":"Tell me more"}],"max_tokens":24,"temperature":0,"ignore_eos":true,'$nothink'}'
curl -s -H "$ct" -o "$tmp/sq0" -d "$sq" "$base/v1/chat/completions"
stop=$($py -c '
import json, sys
t = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
ok = lambda c: 32 < ord(c) < 127 and c not in "\"\\"
for p in range(len(t) // 2, len(t) - 2):
    if all(ok(c) for c in t[p:p + 3]):
        print(t[p:p + 3]); break' "$tmp/sq0")
if [ -z "$stop" ]; then fail "stop strings: no ASCII run in $(cat "$tmp/sq0")"; else
sqs=$(echo "$sq" | sed "s/\"max_tokens\"/\"stop\":[\"zz-never\",\"$stop\"],\"max_tokens\"/")
curl -s -H "$ct" -o "$tmp/sq1" -d "$sqs" "$base/v1/chat/completions"
$py - "$tmp/sq0" "$tmp/sq1" "$stop" <<'EOF' && pass "stop string (OpenAI): text ends before '$stop', finish_reason stop" || fail "stop: $(cat "$tmp/sq1")"
import json, sys
full = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
j = json.load(open(sys.argv[2]))
c = j["choices"][0]
want = full[:full.index(sys.argv[3])].rstrip()
assert c["finish_reason"] == "stop", c
assert c["message"]["content"] == want, (c["message"]["content"], want)
assert j["usage"]["completion_tokens"] < 24
EOF
curl -s -H "$ct" -N -o "$tmp/sq2" -d "$(echo "$sqs" | sed 's/"max_tokens"/"stream":true,"max_tokens"/')" "$base/v1/chat/completions"
$py - "$tmp/sq0" "$tmp/sq2" "$stop" <<'EOF' && pass "stop string (OpenAI stream): no part of it is sent" || fail "stop stream: $(tail -c 600 "$tmp/sq2")"
import json, sys
full = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
text, fin = "", None
for e in open(sys.argv[2]).read().split("\n\n"):
    if e.startswith("data: {"):
        ch = json.loads(e[6:])["choices"][0]
        text += ch["delta"].get("content") or ""
        fin = ch["finish_reason"] or fin
assert fin == "stop" and text == full[:full.index(sys.argv[3])].rstrip(), (fin, text)
EOF
am='{"model":"m","messages":[{"role":"user","content":"Tell me more"}],"max_tokens":24,"temperature":0,"ignore_eos":true,"thinking":{"type":"disabled"},"stop_sequences":["'$stop'"],"stream":true}'
curl -s -H "$ct" -N -o "$tmp/sq3" -d "$am" "$base/v1/messages"
$py - "$tmp/sq0" "$tmp/sq3" "$stop" <<'EOF' && pass "stop_sequences (Anthropic stream): stop_reason stop_sequence + stop_sequence" || fail "stop_sequences: $(tail -c 600 "$tmp/sq3")"
import json, sys
full = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
text, delta = "", None
for e in open(sys.argv[2]).read().split("\n\n"):
    if "\ndata: " in e:
        d = json.loads(e.split("\ndata: ", 1)[1])
        if d["type"] == "content_block_delta": text += d["delta"].get("text", "")
        if d["type"] == "message_delta": delta = d["delta"]
assert delta == {"stop_reason": "stop_sequence", "stop_sequence": sys.argv[3]}, delta
assert text == full[:full.index(sys.argv[3])].rstrip(), text
EOF
fi
st=$(code POST /v1/chat/completions "$tmp/sq4" -d '{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}')
[ "$st" = 400 ] && check "$tmp/sq4" '"at most 4 stop strings" in j["error"]["message"]' && pass "400 five stop strings" || fail "5 stops: $st $(cat "$tmp/sq4")"
st=$(code POST /v1/messages "$tmp/sq5" -d '{"max_tokens":4,"messages":[{"role":"user","content":"x"}],"stop_sequences":"x"}')
[ "$st" = 400 ] && check "$tmp/sq5" '"stop_sequences" in j["error"]["message"]' && pass "400 stop_sequences not an array" || fail "stop_sequences string: $st $(cat "$tmp/sq5")"

tools='"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]'
st=$(code POST /v1/chat/completions "$tmp/tc1" -d '{"messages":[{"role":"user","content":"x"}],'"$tools"',"tool_choice":{"type":"function","function":{"name":"rm"}}}')
[ "$st" = 400 ] && check "$tmp/tc1" '"no tool named '"'rm'"'" in j["error"]["message"]' && pass "400 tool_choice names an unknown tool (OpenAI)" || fail "tool_choice unknown: $st $(cat "$tmp/tc1")"
st=$(code POST /v1/messages "$tmp/tc2" -d '{"max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"read_file","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"rm"}}')
[ "$st" = 400 ] && check "$tmp/tc2" "$an_err" && pass "400 tool_choice names an unknown tool (Anthropic)" || fail "tool_choice unknown anthropic: $st $(cat "$tmp/tc2")"
st=$(code POST /v1/chat/completions "$tmp/tc3" -d '{"messages":[{"role":"user","content":"x"}],'"$tools"',"tool_choice":"none","max_tokens":8,'$nothink'}')
[ "$st" = 200 ] && check "$tmp/tc3" 'j["choices"][0]["finish_reason"] in ("stop", "length") and not j["choices"][0]["message"].get("tool_calls")' \
    && pass "tool_choice none: an answer without tool calls" || fail "tool_choice none: $st $(cat "$tmp/tc3")"
st=$(code POST /v1/chat/completions "$tmp/tc4" -d '{"messages":[{"role":"user","content":"x"}],'"$tools"',"tool_choice":{"type":"function","function":{"name":"read_file"}},"max_tokens":6,"ignore_eos":true,'$nothink'}')
# a random model does not finish the forced call: it comes back as text starting with it
[ "$st" = 200 ] && check "$tmp/tc4" '(j["choices"][0]["message"]["content"] or "").startswith("<tool_call>\n<function=read_file>") or j["choices"][0]["message"].get("tool_calls")' \
    && pass "tool_choice named: the answer starts with the forced call" || fail "tool_choice named: $st $(cat "$tmp/tc4")"

# keep-alive while a long prompt is prefilled: comment lines (OpenAI) / pings (Anthropic)
# arrive after the stream's head and before the first token. A server of its own with a
# short --keepalive, so that the ~7k-token prompt spans several intervals however fast the
# machine prefills it.
kpid_main=$pid kbase=$base
e2e_start "$tmp/k.log" --no-bank-disk --ctx 16384 --keepalive 0.02
kpid=$pid
base=http://127.0.0.1:$port
$py -c 'import json; print(json.dumps({"model":"m","max_tokens":2,"stream":True,"messages":[{"role":"user","content":" ".join("k%d" % (i*7919 % 10007) for i in range(1200))}]}))' > "$tmp/ka.json"
curl -s -H "$ct" -N -o "$tmp/ka1" --data-binary "@$tmp/ka.json" "$base/v1/chat/completions"
$py - "$tmp/ka1" <<'EOF' && pass "keep-alive comments during a long prefill (OpenAI)" || fail "keep-alive openai: $(head -c 800 "$tmp/ka1")"
import sys
ev = [e for e in open(sys.argv[1]).read().split("\n\n") if e]
first_tok = next(i for i, e in enumerate(ev) if '"delta":{"role"' not in e and e.startswith("data: {"))
ka = [i for i, e in enumerate(ev) if e == ": keepalive"]
assert ka and max(ka) < first_tok and ev[-1] == "data: [DONE]", ev[:6]
print(len(ka), file=sys.stderr)
EOF
sed 's/k/q/g' "$tmp/ka.json" > "$tmp/ka2.json"
curl -s -H "$ct" -N -o "$tmp/ka2" --data-binary "@$tmp/ka2.json" "$base/v1/messages"
$py - "$tmp/ka2" <<'EOF' && pass "keep-alive pings during a long prefill (Anthropic)" || fail "keep-alive anthropic: $(head -c 800 "$tmp/ka2")"
import sys
names = [e.split("\n")[0] for e in open(sys.argv[1]).read().split("\n\n") if e]
first = names.index("event: content_block_start")
assert names[0] == "event: message_start" and names[1:first].count("event: ping") >= 2, names[:8]
assert names[-1] == "event: message_stop"
EOF
# a client that goes away during a long prefill cancels it between two chunks. The client
# hangs up on the first keep-alive, which is sent only between prefill chunks (so the prefill
# is running then), with most of the ~12k-token prompt still to go; /metrics must count the
# cancel at stage prefill with the prompt tokens it left, and the next request is answered.
$py -c 'import json; print(json.dumps({"model":"m","max_tokens":2,"stream":True,"messages":[{"role":"user","content":" ".join("d%d" % (i*7919 % 10007) for i in range(2000))}]}))' > "$tmp/dc.json"
$py - "$port" "$tmp/dc.json" <<'EOF' && pass "a client hangs up on the first keep-alive of a long prefill" || fail "disconnect in prefill: no keep-alive before the answer"
import socket, sys
port, body = int(sys.argv[1]), open(sys.argv[2], "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
got = b""
while b": keepalive" not in got:
    d = s.recv(65536)
    assert d and b"[DONE]" not in got, got[-400:]
    got += d
s.close()
EOF
t0=$(date +%s.%N)
answered "$tmp/dc2" 100
dt=$($py -c "import sys; print('%.2f' % ($(date +%s.%N) - $t0))")
[ "$st" = 200 ] && check "$tmp/dc2" 'j["object"] == "chat.completion"' \
    && pass "the next request after a disconnect during the prefill is answered (in $dt s)" || fail "after disconnect in prefill: status $st after $dt s"
curl -s -H "$ct" -o "$tmp/dcm" "$base/metrics"
left=$($py - "$tmp/dcm" <<'EOF'
import sys
m = {}
for line in open(sys.argv[1]):
    if line.strip() and not line.startswith("#"):
        k, v = line.rsplit(" ", 1); m[k] = float(v)
c = lambda st: m.get('headstart_cancelled_requests_total{stage="%s"}' % st)
left = m.get("headstart_cancelled_prefill_tokens_total", 0)
assert (c("queue"), c("prefill"), c("generation")) == (0, 1, 0), (c("queue"), c("prefill"), c("generation"))
assert 0 < left < m["headstart_prompt_tokens_total"], left
print(int(left))
EOF
) && pass "/metrics: the cancel stopped the prefill ($left prompt tokens left uncomputed)" \
    || fail "/metrics after a disconnect in prefill: $(grep cancel "$tmp/dcm")"
e2e_stop "$kpid"; rc=$?
[ $rc -eq 0 ] && pass "SIGTERM (keep-alive server): exit 0" || fail "keep-alive server: exit $rc"

# keep-alive while tokens have no text to send: a scripted answer (HEADSTART_TEST_EMIT) says
# "Hello", then opens a tool call whose long argument the parser holds back until the call
# closes (tens of thousands of tokens of nothing to send). Keep-alives must keep coming after
# "Hello": without them a stream is closed after --idle-timeout with nothing moving (seen: 8
# streams of a random model, whose tokens often have empty text, cut off mid-answer).
$py -c 'import json; print(json.dumps(["Hello\n<tool_call>\n<function=read_file>\n<parameter=path>\n" + "ab " * 20000 + "\n</parameter>\n</function>\n</tool_call>"]))' > "$tmp/quiet.json"
HEADSTART_TEST_EMIT=$tmp/quiet.json e2e_start "$tmp/q.log" --no-bank-disk --ctx 65536 --keepalive 0.01
qpid=$pid
$py -c 'import json; print(json.dumps({"model":"m","max_tokens":30000,"stream":True,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":False},"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]}))' > "$tmp/quiet_req.json"
curl -s -H "$ct" -N -o "$tmp/quiet" --data-binary "@$tmp/quiet_req.json" "http://127.0.0.1:$port/v1/chat/completions"
$py - "$tmp/quiet" <<'EOF2' && pass "keep-alive comments while the answer's tokens have no text yet (a held-back tool call)" || fail "keep-alive while quiet: $(head -c 800 "$tmp/quiet")"
import json, sys
ev = [e for e in open(sys.argv[1]).read().split("\n\n") if e]
text = lambda e: e.startswith("data: {") and json.loads(e[6:])["choices"][0]["delta"].get("content")
first = next(i for i, e in enumerate(ev) if text(e))
later = [i for i, e in enumerate(ev) if e == ": keepalive" and i > first]
assert later and ev[-1] == "data: [DONE]", ev[:12]
print(len(later), file=sys.stderr)
EOF2
e2e_stop "$qpid"; rc=$?
[ $rc -eq 0 ] && pass "SIGTERM (quiet-answer server): exit 0" || fail "quiet-answer server: exit $rc"
pid=$kpid_main base=$kbase

# SIGTERM with one request running and one queued (--parallel 1): the stream ends with an
# in-stream error and [DONE], the queued request gets a 503 in its API's shape, and the
# server exits 0.
e2e_start "$tmp/c.log" --no-bank-disk --parallel 1 --ctx 16384 --max-tokens-default 0
base=http://127.0.0.1:$port
cpid_srv=$pid
curl -s -H "$ct" -N -o "$tmp/run" -d "$long" "$base/v1/chat/completions" &
c1=$!
i=0
while [ $i -lt 100 ] && ! grep -q chatcmpl "$tmp/run" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
curl -s -H "$ct" -o "$tmp/queued" -w '%{http_code}' -d "$msgs" "$base/v1/messages" > "$tmp/queued.code" &
c2=$!
i=0
while [ $i -lt 100 ] && ! curl -s -H "$ct" "$base/health" | grep -q '"queue_depth":2'; do sleep 0.05; i=$((i + 1)); done
kill -TERM "$cpid_srv"
wait "$c1" "$c2"
tail -c 400 "$tmp/run" | grep -q '"error"' && [ "$(tail -c 14 "$tmp/run")" = "data: [DONE]" ] && pass "SIGTERM: the running stream ends with an error event and [DONE]" || fail "stream at stop: $(tail -c 300 "$tmp/run")"
[ "$(cat "$tmp/queued.code")" = 503 ] && check "$tmp/queued" 'j["type"] == "error" and j["error"]["type"] == "overloaded_error"' \
    && pass "SIGTERM: a queued request gets 503" || fail "queued at stop: $(cat "$tmp/queued.code") $(cat "$tmp/queued")"
e2e_stop "$cpid_srv"; rc=$? # (the second SIGTERM waits in the stopping server's signal mask)
[ $rc -eq 0 ] && pass "SIGTERM while busy: exit 0" || fail "SIGTERM while busy: exit $rc (124: still running after 5 s)"

# stop both; a sanitizer build reports leaks and errors into the logs at exit
for p in $apid $bpid; do
    e2e_stop "$p"; rc=$?
    [ $rc -eq 0 ] && pass "SIGTERM: exit 0" || fail "SIGTERM: exit $rc (124: still running after 5 s)"
done
if r=$(e2e_sanitizer "$tmp"/*.log); then fail "sanitizer report: $r"
else pass "no sanitizer report in the server logs"; fi
finish
