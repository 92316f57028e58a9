"""concurrent_clients.py — the clients and comparisons of tests/e2e/concurrent.sh (python3 stdlib only;
it lies in tests/e2e/lib, outside the *.sh glob the test runner runs).

Subcommands (each prints what went wrong and exits 1, or prints a short summary and exits 0):
  specs DIR                 writes the request sets DIR/{main,hang,head,mem,never}.json
  run PORT SET OUT MODE [sample] [reverse]
                            sends every request of SET: MODE "alone" one after another,
                            "wave" all at once; OUT gets one result per request
  compare ALONE ALOG WAVE WLOG [all]
                            every answered request of WAVE equals its ALONE run: the same
                            output and the same first_logits_sha256 in the logs; with "all"
                            every request but the hang-ups must have been answered 200.
                            Exit status 3: all equal, but the wave did not overlap
  metrics PORT OUT          /metrics as a JSON object (name{labels} -> value)
  memsize MODEL ALONE ALOG SET OUT
                            the --seq-ram size that holds two requests of SET but not three
  (the rest are small checks concurrent.sh names where it calls them)

Invariants:
  1. A request's output is compared with the same request in the same API and the same
     stream mode, so nothing is normalised but ids and times: the reasoning text, the answer
     text, the tool calls, the stop reason and the token counts must be equal.
  2. A wave cannot pass vacuously: every body is sent but its last byte, then one thread
     sends all the last bytes in a row, and `compare` fails unless every request of the wave was
     in the server before the first one was answered (the lifetimes intersect), every answer
     has its id, and every id has a log line with a 64-hex first_logits_sha256.
  3. Every socket has a timeout (60 s), so no wait is unbounded.
"""
import http.client
import json
import os
import re
import socket
import sys
import threading
import time

TIMEOUT = 60
HEX64 = re.compile(r"^[0-9a-f]{64}$")

# ---- the request sets --------------------------------------------------------------------

AGENT = ("You are a coding agent in a checked-out repository. Read files before you change "
         "them, run the tests after every change, and explain each edit in one sentence. ")
USERS = [
    "Hi.",
    "List the files in src and say which one is the largest.",
    "Explain in two lines what the bank keeps between requests, and why a head anchor helps.",
    "The build fails with an undefined reference to engine_forward_batch in tests/unit. "
    "Find the Makefile rule that links the unit tests, say which object is missing, and fix it. "
    "Then run the engine suite and report the counts.",
    "Write a haiku about caches.",
    "Rename the function session_run to session_execute everywhere, including the docs, "
    "and make sure nothing else changes.",
]


def head_data():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "golden", "data", "bank", "head.json")) as f:
        return json.load(f)


def anthropic_tools(tools):
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": t["function"]["parameters"]} for t in tools]


def responses_tools(tools):
    return [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
             "parameters": t["function"]["parameters"]} for t in tools]


def make(name, api, stream, system, turns, max_tokens, sampling, tools=None, thinking=True,
         ignore_eos=False, hangup=0):
    """One request: turns alternate user / assistant and end with a user turn."""
    b = {"model": "m", "stream": stream}
    b.update(sampling)
    if ignore_eos:
        b["ignore_eos"] = True
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(len(turns))]
    if api == "chat":
        path = "/v1/chat/completions"
        msgs = ([{"role": "system", "content": system}] if system else [])
        msgs += [{"role": r, "content": t} for r, t in zip(roles, turns)]
        b.update(messages=msgs, max_tokens=max_tokens)
        if stream:
            b["stream_options"] = {"include_usage": True}
        if tools:
            b["tools"] = tools
        if not thinking:
            b["chat_template_kwargs"] = {"enable_thinking": False}
    elif api == "messages":
        path = "/v1/messages"
        b.update(messages=[{"role": r, "content": t} for r, t in zip(roles, turns)], max_tokens=max_tokens)
        if system:
            b["system"] = system
        if tools:
            b["tools"] = anthropic_tools(tools)
        if not thinking:
            b["thinking"] = {"type": "disabled"}
    else:
        path = "/v1/responses"
        b.update(input=[{"role": r, "content": t} for r, t in zip(roles, turns)], max_output_tokens=max_tokens)
        if system:
            b["instructions"] = system
        if tools:
            b["tools"] = responses_tools(tools)
    return {"name": name, "api": api, "path": path, "stream": stream, "hangup": hangup,
            "max_tokens": max_tokens, "body": b}


def sampling_for(k, seed):
    """Greedy, temperature 0.7 with a seed, and the same with top_p / top_k / min_p."""
    return [{"temperature": 0},
            {"temperature": 0.7, "seed": seed},
            {"temperature": 0.7, "top_p": 0.9, "seed": seed},
            {"temperature": 0.7, "top_k": 20, "min_p": 0.02, "seed": seed, "presence_penalty": 0.5}][k % 4]


def specs(out_dir):
    h = head_data()
    apis = ["chat", "messages", "responses"]
    main = []
    for i in range(16):
        # lengths: a bare question, a short system, a long system, the long head with tools,
        # a multi-turn conversation (from ~15 to ~1.5k tokens on the tiny model's tokenizer)
        shape = (i * 3) % 5
        system, turns, tools = None, [USERS[i % len(USERS)]], None
        if shape == 1:
            system = "Answer briefly."
        elif shape == 2:
            system = AGENT * (2 + i % 3)
        elif shape == 3:
            system, tools = h["system"], h["tools"][: 1 + i % 5]
        elif shape == 4:
            system = AGENT
            turns = [USERS[(i + 1) % len(USERS)], "I looked: " + USERS[(i + 2) % len(USERS)], USERS[i % len(USERS)]]
        main.append(make("m%02d" % i, apis[i % 3], (i // 3) % 2 == 0, system, turns, 8 + (i * 5) % 17,
                         sampling_for(i, 1000 + i), tools=tools, thinking=(i % 5 != 0), ignore_eos=(i % 2 == 1)))
    # long streams that hang up after three events: --max-tokens-default 0 lets them run for
    # thousands of tokens, so each is still generating when its client goes away
    hang = [make("h%d" % i, apis[i % 3], True, None, ["Count to a million. " + USERS[i]], 3500,
                 sampling_for(i, 7 + i), ignore_eos=True, hangup=3) for i in range(4)]
    # one head (system + 5 tools, ~1.4k tokens), four different last user messages
    head = [make("s%d" % i, "chat", i % 2 == 1, h["system"], [USERS[i + 1]], 8, {"temperature": 0},
                 tools=h["tools"]) for i in range(4)]
    # a dozen requests of about the same size (system ~100 tokens, 64 tokens out)
    mem = [make("r%02d" % i, apis[i % 3], i % 2 == 0, AGENT * 2, ["Request %02d: %s" % (i, USERS[i % 3])], 64,
                sampling_for(i, 50 + i), ignore_eos=True) for i in range(12)]
    # the long head and a long output cap: state that cannot fit a small --seq-ram
    never = [make("n%d" % i, apis[i], i == 1, h["system"], [USERS[3]], 1000, {"temperature": 0},
                  tools=h["tools"], ignore_eos=True) for i in range(3)]
    for name, s in (("main", main), ("hang", hang), ("head", head), ("mem", mem), ("never", never)):
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(s, f)
    return 0


# ---- reading answers -----------------------------------------------------------------------

def sse_events(data):
    """[(event name or None, parsed data or the raw string)] of an SSE body."""
    out = []
    for block in data.decode("utf-8").split("\n\n"):
        name, payload = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                payload.append(line[6:])
        if not payload:
            continue
        p = "\n".join(payload)
        out.append((name, p if p == "[DONE]" else json.loads(p)))
    return out


def canon_chat(j):
    m = j["choices"][0]["message"]
    tools = [(c["function"]["name"], c["function"]["arguments"]) for c in (m.get("tool_calls") or [])]
    u = j["usage"]
    return {"reasoning": m.get("reasoning_content") or "", "content": m.get("content") or "", "tools": tools,
            "stop": j["choices"][0]["finish_reason"], "out_tokens": u["completion_tokens"],
            "prompt_tokens": u["prompt_tokens"], "cached": u["prompt_tokens_details"]["cached_tokens"]}, j["id"]


def canon_chat_stream(evs):
    assert evs and evs[-1][1] == "[DONE]", "no data: [DONE]"
    r, c, tools, stop, usage, rid = "", "", {}, None, None, None
    for _, e in evs[:-1]:
        rid = rid or e["id"]
        assert e["id"] == rid, "the id changed within the stream"
        if e.get("usage"):
            usage = e["usage"]
        for ch in e["choices"]:
            d = ch.get("delta") or {}
            r += d.get("reasoning_content") or ""
            c += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                t = tools.setdefault(tc["index"], ["", ""])
                t[0] += (tc.get("function") or {}).get("name") or ""
                t[1] += (tc.get("function") or {}).get("arguments") or ""
            stop = ch.get("finish_reason") or stop
    assert usage, "no usage chunk (include_usage)"
    return {"reasoning": r, "content": c, "tools": [tuple(tools[k]) for k in sorted(tools)], "stop": stop,
            "out_tokens": usage["completion_tokens"], "prompt_tokens": usage["prompt_tokens"],
            "cached": usage["prompt_tokens_details"]["cached_tokens"]}, rid


def canon_messages(j):
    r = "".join(b.get("thinking", "") for b in j["content"] if b["type"] == "thinking")
    c = "".join(b.get("text", "") for b in j["content"] if b["type"] == "text")
    tools = [(b["name"], json.dumps(b["input"], sort_keys=True)) for b in j["content"] if b["type"] == "tool_use"]
    u = j["usage"]
    return {"reasoning": r, "content": c, "tools": tools, "stop": j["stop_reason"], "out_tokens": u["output_tokens"],
            "prompt_tokens": u["input_tokens"] + u["cache_read_input_tokens"],
            "cached": u["cache_read_input_tokens"]}, j["id"]


def canon_messages_stream(evs):
    names = [n for n, _ in evs]
    assert names and names[0] == "message_start" and names[-1] == "message_stop", names[:3]
    start = evs[0][1]["message"]
    r, c, blocks, stop, out = "", "", {}, None, None
    for n, e in evs:
        if n == "content_block_start":
            blocks[e["index"]] = [e["content_block"]["type"], e["content_block"].get("name", ""), ""]
        elif n == "content_block_delta":
            d = e["delta"]
            r += d.get("thinking", "")
            c += d.get("text", "")
            blocks[e["index"]][2] += d.get("partial_json", "")
        elif n == "message_delta":
            stop, out = e["delta"]["stop_reason"], e["usage"]["output_tokens"]
    tools = [(b[1], json.dumps(json.loads(b[2] or "{}"), sort_keys=True)) for k, b in sorted(blocks.items())
             if b[0] == "tool_use"]
    u = start["usage"]
    return {"reasoning": r, "content": c, "tools": tools, "stop": stop, "out_tokens": out,
            "prompt_tokens": u["input_tokens"] + u["cache_read_input_tokens"],
            "cached": u["cache_read_input_tokens"]}, start["id"]


def canon_responses(j):
    r, c, tools = "", "", []
    for it in j["output"]:
        if it["type"] == "reasoning":
            r += "".join(p.get("text", "") for p in it.get("content") or [])
        elif it["type"] == "message":
            c += "".join(p.get("text", "") for p in it["content"] if p["type"] == "output_text")
        elif it["type"] == "function_call":
            tools.append((it["name"], it["arguments"]))
    stop = j["status"] + "/" + ((j.get("incomplete_details") or {}).get("reason") or "")
    u = j["usage"]
    return {"reasoning": r, "content": c, "tools": tools, "stop": stop, "out_tokens": u["output_tokens"],
            "prompt_tokens": u["input_tokens"], "cached": u["input_tokens_details"]["cached_tokens"]}, j["id"]


def canon_responses_stream(evs):
    names = [n for n, _ in evs]
    assert names and names[0] == "response.created", names[:3]
    final = [e for n, e in evs if n in ("response.completed", "response.incomplete", "response.failed")]
    assert final, "no final response event"
    res, rid = canon_responses(final[-1]["response"])
    assert rid == evs[0][1]["response"]["id"], "the final response's id is not the created one's"
    # the deltas must add up to what the final event says
    r = "".join(e["delta"] for n, e in evs if n == "response.reasoning_text.delta")
    c = "".join(e["delta"] for n, e in evs if n == "response.output_text.delta")
    assert (r, c) == (res["reasoning"], res["content"]), "the deltas differ from the final response"
    return res, rid


CANON = {("chat", False): canon_chat, ("chat", True): canon_chat_stream,
         ("messages", False): canon_messages, ("messages", True): canon_messages_stream,
         ("responses", False): canon_responses, ("responses", True): canon_responses_stream}


def stream_id(api, ev):
    """The response id carried by the first event of a stream."""
    n, e = ev
    if api == "chat":
        return e["id"]
    if api == "messages":
        return e["message"]["id"]
    return e["response"]["id"]


def error_shape_ok(api, status, j):
    """The API's error shape: OpenAI {"error":{"message","type",...}}, Anthropic
    {"type":"error","error":{"type","message"}}, with the type each status has."""
    if not isinstance(j, dict):
        return False
    e = j.get("error")
    if not isinstance(e, dict) or not isinstance(e.get("message"), str) or not e["message"]:
        return False
    if api == "messages":
        want = {429: "rate_limit_error", 400: "invalid_request_error"}.get(status)
        return j.get("type") == "error" and e.get("type") == want
    want = {429: "requests", 400: "invalid_request_error"}.get(status)
    return e.get("type") == want


# ---- sending -------------------------------------------------------------------------------

def send_head(port, spec, res):
    """Opens the connection and sends the request but the last byte of its body; returns
    (connection, last byte)."""
    body = json.dumps(spec["body"]).encode()
    res.update(name=spec["name"], api=spec["api"], stream=spec["stream"], status=0, error=None, id=None)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    conn.putrequest("POST", spec["path"])
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body[:-1])
    return conn, body[-1:]


def read_answer(conn, spec, res):
    """Reads the answer, or hangs up after spec["hangup"] data events of a stream."""
    try:
        r = conn.getresponse()
        res["status"] = r.status
        res["retry_after"] = r.getheader("Retry-After")
        if r.status != 200:
            data = r.read()
            try:
                res["error"] = json.loads(data)
            except ValueError:
                res["error"] = data.decode("utf-8", "replace")
        elif spec["hangup"]:
            # read until hangup data events came, then go away without a word
            buf, n = b"", 0
            while n < spec["hangup"]:
                line = r.fp.readline()
                if not line:
                    raise AssertionError("the stream ended before the hang-up")
                buf += line
                if line.startswith(b"data: "):
                    n += 1
            buf += b"\n"
            res["id"] = stream_id(spec["api"], sse_events(buf)[0])
            res["events_read"] = n
            conn.sock.shutdown(socket.SHUT_RDWR)
        elif spec["stream"]:
            res["out"], res["id"] = CANON[(spec["api"], True)](sse_events(r.read()))
        else:
            res["out"], res["id"] = CANON[(spec["api"], False)](json.loads(r.read()))
    except Exception as e:  # recorded, judged by the caller
        res["error"] = "%s: %r" % (type(e).__name__, e)
    finally:
        res["t_end"] = time.time()
        conn.close()


def sampler(port, stop, samples):
    """Polls /metrics during a wave: the running and waiting gauges (None where absent)."""
    while not stop.is_set():
        try:
            m = metrics(port)
            samples.append([m.get("headstart_running_sequences"), m.get("headstart_waiting_requests")])
        except Exception:
            pass
        stop.wait(0.003)


def run(port, set_file, out, mode, sample=False, reverse=False):
    """alone: one request after another. wave: every request sent but its last byte, then
    one thread sends all the last bytes in a row (well under a millisecond; in reverse order
    with `reverse`), and a thread per request reads its answer; `sample` polls /metrics
    meanwhile."""
    port = int(port)
    reqs = json.load(open(set_file))
    results = [{} for _ in reqs]
    samples, stop = [], threading.Event()
    try:
        if mode == "alone":
            for spec, res in zip(reqs, results):
                conn, last = send_head(port, spec, res)
                res["t_start"] = time.time()
                conn.send(last)
                res["t_sent"] = time.time()
                read_answer(conn, spec, res)
        else:
            conns = [send_head(port, spec, res) for spec, res in zip(reqs, results)]
            smp = threading.Thread(target=sampler, args=(port, stop, samples)) if sample else None
            if smp:
                smp.start()
                time.sleep(0.02)
            order = list(zip(conns, results))
            for (conn, last), res in (order[::-1] if reverse else order):
                res["t_start"] = time.time()
                conn.send(last)
                res["t_sent"] = time.time()
            ts = [threading.Thread(target=read_answer, args=(c, s, r)) for (c, _), s, r in zip(conns, reqs, results)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(TIMEOUT + 5)
            stop.set()
            if smp:
                smp.join(5)
    except Exception as e:
        print("sending failed: %r" % e)
        return 1
    json.dump({"mode": mode, "results": results, "samples": samples}, open(out, "w"))
    bad = [r for r in results if not r.get("status")]
    for r in bad:
        print("%s: no answer: %s" % (r.get("name"), r.get("error")))
    return 1 if bad else 0


# ---- the log and /metrics ---------------------------------------------------------------------

def log_lines(path):
    """id -> the request line of a --log-format json server log."""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("event") == "request" and o.get("id"):
            out[o["id"]] = o
    return out


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    m = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            m[k] = float(v)
    return m


# ---- the comparisons ---------------------------------------------------------------------------

def load(path):
    return json.load(open(path))


def compare(alone_f, alog_f, wave_f, wlog_f, only=None):
    """Every answered request of the wave equals its alone run (invariant 1) and the wave
    really overlapped (invariant 2). With `only` ("all") every request must have been
    answered 200; without, one refused (429) is left to the caller's own check. Hang-ups
    are never compared."""
    alone = {r["name"]: r for r in load(alone_f)["results"]}
    wave = load(wave_f)["results"]
    alog, wlog = log_lines(alog_f), log_lines(wlog_f)
    problems, n_cmp, overlap = [], 0, True
    for w in wave:
        name = w["name"]
        if w.get("events_read"):
            continue
        if w["status"] != 200:
            if only:
                problems.append("%s: status %s %s" % (name, w["status"], str(w.get("error"))[:200]))
            continue
        a = alone.get(name)
        if not a or a["status"] != 200:
            problems.append("%s: no alone run to compare with" % name)
            continue
        if w.get("error") or not w.get("id"):
            problems.append("%s: %s" % (name, w.get("error") or "no id in the answer"))
            continue
        if w["out"] != {**a["out"], "cached": w["out"]["cached"]}:
            problems.append("%s: output differs:\n   alone %s\n   wave  %s" % (name, json.dumps(a["out"])[:400],
                                                                              json.dumps(w["out"])[:400]))
        la, lw = alog.get(a["id"]), wlog.get(w["id"])
        if not la or not lw:
            problems.append("%s: no log line for id %s" % (name, a["id"] if not la else w["id"]))
            continue
        ha, hw = la.get("first_logits_sha256", ""), lw.get("first_logits_sha256", "")
        if not HEX64.match(ha) or not HEX64.match(hw):
            problems.append("%s: first_logits_sha256 missing or malformed: %r %r" % (name, ha, hw))
        elif ha != hw:
            problems.append("%s: first_logits_sha256 differs: alone %s, wave %s" % (name, ha[:16], hw[:16]))
        if lw.get("generated_tokens") != w["out"]["out_tokens"]:
            problems.append("%s: the log says %s tokens, the answer %s" % (name, lw.get("generated_tokens"),
                                                                          w["out"]["out_tokens"]))
        n_cmp += 1
    if load(wave_f)["mode"] == "wave":
        sent = max(r["t_sent"] for r in wave if "t_sent" in r)
        first = min(r["t_end"] for r in wave)
        if not sent < first:
            overlap = False
            problems.append("the wave did not overlap: the last request was sent %.1f ms after the first answer"
                            % ((sent - first) * 1000))
        margin = " (all in the server %.1f ms before the first answer)" % ((first - sent) * 1000)
    else:
        margin = ""
    if n_cmp == 0:
        problems.append("nothing compared")
    for p in problems[:12]:
        print(p)
    if not problems:
        print("%d requests equal their alone runs (output and first_logits_sha256)%s" % (n_cmp, margin))
    # 3: the answers were right but the wave did not overlap, so it proved nothing (the
    # sender lost the CPU between requests, say): the caller may send it again
    return 0 if not problems else 3 if not overlap and len(problems) == 1 else 1


def kv_geometry(model_dir):
    """(KV bytes per token, GDN state bytes) of a Qwen3.5 model's config: attention layers x
    K and V x kv heads x head_dim x f32; per GDN layer the conv window (kernel-1 rows of the
    q, k, v channels) and the recurrent state (value heads x Dk x Dv), f32 — the layouts of
    engine_kv_row_bytes and engine_snapshot_bytes."""
    c = json.load(open(os.path.join(model_dir, "config.json")))
    t = c.get("text_config", c)
    kinds = t["layer_types"]
    n_attn = sum(1 for k in kinds if k == "full_attention")
    n_gdn = len(kinds) - n_attn
    kv = n_attn * 2 * t["num_key_value_heads"] * t["head_dim"] * 4
    dk, dv, hk, hv = t["linear_key_head_dim"], t["linear_value_head_dim"], t["linear_num_key_heads"], t["linear_num_value_heads"]
    conv = (t["linear_conv_kernel_dim"] - 1) * (2 * hk * dk + hv * dv) * 4
    return kv, n_gdn * (conv + hv * dk * dv * 4)


def memsize(model_dir, alone_f, alog_f, set_file, out):
    """The --seq-ram size for the memory checks: a request's state is its KV for prompt +
    output cap plus one GDN state; the size holds 2 of the biggest and not 3 of the smallest
    (2 * max + min / 2). The prompt sizes come from the alone runs."""
    kv, gdn = kv_geometry(model_dir)
    alone = {r["name"]: r for r in load(alone_f)["results"]}
    sizes = []
    for s in load(set_file):
        a = alone.get(s["name"])
        if not a or a["status"] != 200:
            print("%s: no alone run" % s["name"])
            return 1
        sizes.append((a["out"]["prompt_tokens"] + s["max_tokens"]) * kv + gdn)
    size = 2 * max(sizes) + min(sizes) // 2
    if not 3 * min(sizes) > size:
        print("the requests differ too much in size: %s" % sizes)
        return 1
    open(out, "w").write(str(size))
    print("%d bytes (KV %d B/token, GDN %d B; a request %d..%d B)" % (size, kv, gdn, min(sizes), max(sizes)))
    return 0


def never_size(model_dir, alone_f, set_file, seq_ram):
    """Every request of SET needs more state than seq_ram (so a 400 is the answer)."""
    kv, gdn = kv_geometry(model_dir)
    alone = {r["name"]: r for r in load(alone_f)["results"]}
    for s in load(set_file):
        a = alone.get(s["name"])
        if not a or a["status"] != 200:
            print("%s: no 200 alone run (%s)" % (s["name"], a and a.get("error")))
            return 1
        need = (a["out"]["prompt_tokens"] + s["max_tokens"]) * kv + gdn
        if need <= int(seq_ram):
            print("%s needs %d B, which fits %s" % (s["name"], need, seq_ram))
            return 1
    return 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "specs":
        return specs(*args)
    if cmd == "run":
        return run(args[0], args[1], args[2], args[3], sample="sample" in args[4:], reverse="reverse" in args[4:])
    if cmd == "compare":
        return compare(*args)
    if cmd == "metrics":
        try:
            json.dump(metrics(args[0]), open(args[1], "w"))
        except OSError as e:
            print("/metrics on port %s: %r" % (args[0], e))
            return 1
        return 0
    if cmd == "memsize":
        return memsize(*args)
    if cmd == "never_size":
        return never_size(*args)
    print("unknown subcommand %s" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
