#!/bin/sh
# server_load.sh — a bounded load test of `headstart serve` on a tiny random model: two
# identical waves of 32 concurrent clients (Python threads, stdlib only), each getting 3
# requests answered (a 429 is retried after 20-100 ms, for up to 25 s a wave), mixed across OpenAI chat / Anthropic messages, streaming or not, with a few
# clients hanging up mid-stream, against --max-queue 2 so that many get 429. Every answer
# must be a 200 with a well-formed JSON body or a complete SSE stream (data: [DONE] /
# message_stop), or a 429 with Retry-After and the API's error shape. Afterwards the server
# is still up, /health says ok with an empty queue, /metrics counts exactly what the
# clients saw (per route and status class), and the server's RSS after the second wave is
# within a bound of the first (no growth per request). Bounded: every client request has a
# 30 s timeout and the whole script ends within about a minute.
# Ends with "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup server-load curl "$py"
# (a sanitizer build holds freed memory in a quarantine, which would look like growth)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" \
e2e_start "$tmp/log" --no-bank-disk --bank-ram 64M --max-queue 2 --ctx 4096

rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }

# wave N — runs the clients; writes $tmp/wave.N.json (counts per route and status) and
# prints the problems found (nothing when every answer was well-formed)
wave() {
    $py - "$port" "$tmp/wave.$1.json" <<'EOF'
import http.client, json, random, sys, threading, time

port, out = int(sys.argv[1]), sys.argv[2]
N_CLIENTS, N_REQ, DEADLINE = 32, 3, time.time() + 25
system = "You are a coding agent. Read the files before you change them. " * 4
problems, counts, lock = [], {}, threading.Lock()

def body(api, stream, n):
    user = "Task %d: list the files and say which one is largest." % n
    if api == "openai":
        return "/v1/chat/completions", {"model": "m", "stream": stream, "max_tokens": 16, "temperature": 0.7,
            "seed": n, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            **({"stream_options": {"include_usage": True}} if stream else {})}
    return "/v1/messages", {"model": "m", "stream": stream, "max_tokens": 16, "system": system,
        "messages": [{"role": "user", "content": user}]}

def check_json(api, data):
    j = json.loads(data)
    if api == "openai":
        assert j["object"] == "chat.completion" and j["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"), j
        assert j["usage"]["completion_tokens"] >= 1
    else:
        assert j["type"] == "message" and j["stop_reason"] in ("end_turn", "max_tokens", "tool_use"), j
        assert j["usage"]["output_tokens"] >= 1

def check_sse(api, data):
    text = data.decode("utf-8")
    assert text.endswith("\n\n"), "stream not ended"
    events = [e for e in text.split("\n\n") if e and not e.startswith(":")]
    if api == "openai":
        assert events[-1] == "data: [DONE]", events[-1]
        for e in events[:-1]:
            c = json.loads(e[6:])
            assert c["object"] == "chat.completion.chunk", c
        assert json.loads(events[-2][6:])["usage"]["completion_tokens"] >= 1
    else:
        names = [e.split("\n")[0][7:] for e in events]
        for e in events:
            json.loads(e.split("\n")[1][6:])
        assert names[0] == "message_start" and names[-1] == "message_stop" and "message_delta" in names, names

def one(api, stream, hangup, n):
    path, b = body(api, stream, n)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(b), {"Content-Type": "application/json"})
        r = conn.getresponse()
        key = "%s %d" % (path, r.status)
        if r.status == 429:
            assert r.getheader("Retry-After"), "429 without Retry-After"
            j = json.loads(r.read())
            assert ("error" in j) if api == "openai" else (j["type"] == "error" and j["error"]["type"] == "rate_limit_error"), j
        elif r.status != 200:
            raise AssertionError("status %d: %r" % (r.status, r.read()[:300]))
        elif stream and hangup:
            r.fp.readline()             # the stream began: now go away
            key += " hangup"
        elif stream:
            assert r.getheader("Content-Type").startswith("text/event-stream")
            check_sse(api, r.read())
        else:
            check_json(api, r.read())
        with lock:
            counts[key] = counts.get(key, 0) + 1
        return r.status
    except Exception as e:
        with lock:
            problems.append("%s stream=%s: %r" % (api, stream, e))
        return 0
    finally:
        conn.close()

def client(c):
    rnd = random.Random(c)
    for k in range(N_REQ):
        n = c * N_REQ + k
        # a refused request is retried soon (sooner than Retry-After asks, to keep the
        # queue full) until it is answered or the wave's time is up
        while one("openai" if n % 2 == 0 else "anthropic", (n // 2) % 2 == 0, c % 8 == 7 and k == 0, n) == 429:
            if time.time() > DEADLINE: break
            time.sleep(rnd.uniform(0.02, 0.1))

ts = [threading.Thread(target=client, args=(c,)) for c in range(N_CLIENTS)]
for t in ts: t.start()
for t in ts: t.join(max(1, DEADLINE + 35 - time.time()))
if any(t.is_alive() for t in ts):
    problems.append("clients still running 60 s after the start")
json.dump(counts, open(out, "w"))
for p in problems[:10]:
    print(p)
EOF
}

# metrics_ok — /metrics counts per route and status class equal what the clients saw
metrics_ok() {
    curl -s -o "$tmp/metrics" "http://127.0.0.1:$port/metrics"
    $py - "$tmp/metrics" "$tmp"/wave.*.json <<'EOF'
import json, re, sys
m = {}
for line in open(sys.argv[1]):
    g = re.match(r'headstart_requests_total\{route="([^"]+)",status="(\dxx)"\} (\d+)', line)
    if g: m[(g[1], g[2])] = int(g[3])
want = {}
for f in sys.argv[2:]:
    for k, v in json.load(open(f)).items():
        route, status = k.split()[:2]
        key = (route, status[0] + "xx")
        want[key] = want.get(key, 0) + v
for route in ("/v1/chat/completions", "/v1/messages"):
    for cls in ("2xx", "4xx", "5xx"):
        got, exp = m.get((route, cls), 0), want.get((route, cls), 0)
        assert got == exp, (route, cls, got, exp)
assert re.search(r"^headstart_queue_depth 0$", open(sys.argv[1]).read(), re.M)
print(want)
EOF
}

t0=$(date +%s)
p=$(wave 1)
[ -z "$p" ] && pass "wave 1: every answer well-formed ($(cat "$tmp/wave.1.json"))" || fail "wave 1: $p"
$py -c 'import json,sys; c=json.load(open(sys.argv[1])); s=lambda w: sum(v for k, v in c.items() if w in k)
sys.exit(0 if s(" 429") > 0 and s("/v1/chat/completions 200") > 0 and s("/v1/messages 200") > 0 else 1)' "$tmp/wave.1.json" \
    && pass "wave 1: both APIs answered, and the small queue refused some (429)" || fail "wave 1 mix: $(cat "$tmp/wave.1.json")"
sleep 0.5
rss1=$(rss)
m=$(metrics_ok) && pass "/metrics counts what the clients saw after wave 1 ($m)" || fail "metrics after wave 1: $m"
p=$(wave 2)
[ -z "$p" ] && pass "wave 2: every answer well-formed ($(cat "$tmp/wave.2.json"))" || fail "wave 2: $p"
sleep 0.5
rss2=$(rss)
m=$(metrics_ok) && pass "/metrics counts what the clients saw after both waves" || fail "metrics after wave 2: $m"
h=$(curl -s "http://127.0.0.1:$port/health")
echo "$h" | grep -q '"status":"ok"' && echo "$h" | grep -q '"queue_depth":0' && pass "/health ok, queue empty" || fail "health: $h"
# the bank may fill towards its 64 MiB budget; anything per request beyond that is a leak
[ -n "$rss1" ] && [ -n "$rss2" ] && [ "$rss2" -le $((rss1 + rss1 / 8 + 8192)) ] \
    && pass "RSS bounded across waves (${rss1} kB -> ${rss2} kB)" || fail "RSS grew: ${rss1:-?} kB -> ${rss2:-?} kB"
t1=$(date +%s)
echo "load: both waves in $((t1 - t0)) s"
e2e_stop "$pid"; rc=$?
[ $rc -eq 0 ] && pass "SIGTERM after load: exit 0" || fail "SIGTERM: exit $rc (124: still running after 5 s)"
if r=$(e2e_sanitizer "$tmp/log"); then fail "sanitizer report: $r"
else pass "no sanitizer report in the server log"; fi
finish
