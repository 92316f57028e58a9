#!/usr/bin/env python3
"""make_agent_workload.py — the agent workload of the [F4] benchmark (bench/agent_bench.sh).

Writes JSONL for `headstart replay --requests`: one {"api": ..., "body": ...} line per
request, plus (with --meta) one JSON line per request saying which session and turn it is.

The workload is what coding agents send a server: 4 sessions x 5 turns that all share one
head (the system text + the tool schemas of bench/data/agent_tools.json, ~8k tokens with the
Qwen tokenizer). Each session starts from a different user task; turn k+1 re-sends turn k's
messages plus an assistant message with a tool call, the tool's result and sometimes a user
follow-up, exactly as an agent loop re-sends its whole history. Sessions 0 and 2 speak the
OpenAI chat-completions API, 1 and 3 the Anthropic messages API (with Claude Code's
per-request billing-header system block, which the server strips so the head stays shared).
The sessions are interleaved the way concurrent agents would be (a seeded merge that keeps
each session's turn order), and session 0's first turn always comes first: it is the one
request that must compute the head.

Invariants:
  1. Both APIs get the same tools in the same key order (name, description, parameters), so
     the rendered head is byte-identical across sessions and APIs.
  2. Turn k of a session is a strict message-prefix extension of turn k-1 (history is never
     rewritten), so the bank may restore up to the previous turn's generation prompt.
  3. The output is a pure function of the arguments (no clock, no unseeded randomness).
"""
import argparse
import hashlib
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def numbered(text, start=1):
    """read_file's output format: right-aligned line number, a tab, the line."""
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(text.split("\n"), start))


# ---- the four sessions: a first task, then (tool call, result, optional follow-up) steps ----

DATES_PY = '''"""Parsing of the date strings found in imported CSV files."""
import datetime as _dt
import re

_ISO = re.compile(r"^(\\d{4})-(\\d{2})-(\\d{2})$")
_DMY = re.compile(r"^(\\d{1,2})/(\\d{1,2})/(\\d{4})$")
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}


class DateError(ValueError):
    """A date string that matches no supported format."""


def parse_date(text, *, dayfirst=True):
    """Return a datetime.date for text in one of the supported formats."""
    s = text.strip()
    m = _ISO.match(s)
    if m:
        return _dt.date(int(m[1]), int(m[2]), int(m[3]))
    m = _DMY.match(s)
    if m:
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        day, month = (a, b) if dayfirst else (b, a)
        return _dt.date(year, month, day)
    parts = s.replace(",", " ").split()
    if len(parts) == 3 and parts[1][:3].lower() in _MONTHS:
        return _dt.date(int(parts[2]), _MONTHS[parts[1][:3].lower()], int(parts[0]))
    raise DateError(f"unsupported date: {text!r}")


def parse_range(text):
    """Parse "A..B" into a (start, end) pair of dates; end is inclusive."""
    a, sep, b = text.partition("..")
    if not sep:
        raise DateError(f"not a range: {text!r}")
    start, end = parse_date(a), parse_date(b)
    if end < start:
        raise DateError(f"range ends before it starts: {text!r}")
    return start, end'''

CLI_RS = '''use clap::Parser;
use std::path::PathBuf;

/// Synchronise a local directory with a remote bucket.
#[derive(Parser, Debug)]
#[command(name = "syncd", version, about)]
pub struct Args {
    /// Local directory to synchronise.
    pub source: PathBuf,
    /// Remote bucket URL, such as s3://bucket/prefix.
    pub dest: String,
    /// Show what would be transferred without transferring it.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete remote objects that no longer exist locally.
    #[arg(long)]
    pub delete: bool,
    /// Number of parallel transfers.
    #[arg(short = 'j', long, default_value_t = 4)]
    pub jobs: usize,
    /// Glob patterns of files to skip; may be repeated.
    #[arg(long = "exclude")]
    pub excludes: Vec<String>,
}

pub fn init_logging(args: &Args) {
    let level = if args.dry_run { "info" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
}'''

SERVER_C = '''static void conn_close(struct server *s, struct conn *c)
{
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->req.body) free(c->req.body);
    list_remove(&s->conns, &c->link);
    s->n_conns--;
}

static int conn_read(struct server *s, struct conn *c)
{
    for (;;) {
        if (c->in_len == c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
            char *p = realloc(c->in, cap);
            if (!p) return -1;
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
        if (n > 0) { c->in_len += (size_t)n; continue; }
        if (n == 0) return -1;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        if (errno == EINTR) continue;
        return -1;
    }
}

static void on_timer(struct server *s)
{
    uint64_t now = clock_ms();
    struct conn *c, *next;
    list_for_each_safe(c, next, &s->conns, link)
        if (now - c->last_active > s->idle_timeout_ms) conn_close(s, c);
}'''

NOTEBOOK = json.dumps({"cells": [
    {"id": "a1", "cell_type": "markdown", "source": "# Weekly retention\nCohorts by signup week."},
    {"id": "b2", "cell_type": "code", "source": "import pandas as pd\ndf = pd.read_parquet('events.parquet')\ndf.head()",
     "outputs": ["   user_id  event        ts\n0  17  signup  2024-01-02\n1  17  login   2024-01-03"]},
    {"id": "c3", "cell_type": "code", "source": "cohort = df[df.event == 'signup'].groupby(pd.Grouper(key='ts', freq='W')).user_id.nunique()\ncohort.plot()",
     "outputs": ["<Axes: xlabel='ts'>"]},
]}, indent=1)

SESSIONS = [
    {
        "task": "The test tests/test_dates.py::test_parse_range_inclusive started failing after yesterday's "
                "merge. Find out why and fix it without changing the test's expectations.",
        "steps": [
            ("Let me run the failing test first to see the error.", "run_tests",
             {"filter": "test_parse_range_inclusive", "paths": ["tests/test_dates.py"]},
             "1 failed, 0 passed, 0 skipped in 0.41s\n\nFAILED tests/test_dates.py::test_parse_range_inclusive "
             "(tests/test_dates.py:58)\n    def test_parse_range_inclusive():\n        start, end = parse_range('03/04/2024..05/04/2024')\n"
             ">       assert (start.month, end.month) == (4, 4)\nE       assert (3, 5) == (4, 4)\nE         At index 0 diff: 3 != 4\n\n"
             "tests/test_dates.py:60: AssertionError", None),
            ("The day and month come out swapped. I'll read the parser.", "read_file",
             {"file_path": "src/importer/dates.py"}, numbered(DATES_PY), None),
            ("parse_range calls parse_date without dayfirst; let me check yesterday's change to it.", "git_diff",
             {"base": "HEAD~1", "paths": ["src/importer/dates.py"]},
             "diff --git a/src/importer/dates.py b/src/importer/dates.py\n--- a/src/importer/dates.py\n+++ b/src/importer/dates.py\n"
             "@@ -14,7 +14,7 @@ class DateError(ValueError):\n \n \n-def parse_date(text, *, dayfirst=False):\n+def parse_date(text, *, dayfirst=True):\n"
             "     \"\"\"Return a datetime.date for text in one of the supported formats.\"\"\"\n     s = text.strip()\n     m = _ISO.match(s)",
             "Note the importer's CSVs come from the US office, so month-first is what we want there."),
            ("The default flipped to day-first. Restoring the month-first default, as the US files need.", "edit_file",
             {"file_path": "src/importer/dates.py", "old_string": "def parse_date(text, *, dayfirst=True):",
              "new_string": "def parse_date(text, *, dayfirst=False):"},
             "The file src/importer/dates.py has been updated. Here is the result of running `cat -n` on a snippet:\n"
             "    15\t\n    16\tdef parse_date(text, *, dayfirst=False):\n    17\t    \"\"\"Return a datetime.date for text in one of the supported formats.\"\"\"\n"
             "    18\t    s = text.strip()", None),
        ],
    },
    {
        "task": "Add a --verbose / -v flag to the syncd command line that sets the log level to debug, "
                "and document it in the help text. Keep --dry-run's behaviour as it is.",
        "steps": [
            ("I'll plan this in a few steps.", "todo_write",
             {"todos": [
                 {"id": "1", "content": "Find the argument parser", "active_form": "Finding the argument parser", "status": "in_progress"},
                 {"id": "2", "content": "Add the --verbose flag", "active_form": "Adding the --verbose flag", "status": "pending"},
                 {"id": "3", "content": "Wire it to the log level", "active_form": "Wiring it to the log level", "status": "pending", "depends_on": ["2"]},
                 {"id": "4", "content": "Build and run the CLI tests", "active_form": "Building and running the CLI tests", "status": "pending"}]},
             "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.", None),
            ("Looking for the parser.", "grep",
             {"pattern": "derive\\(Parser", "type": "rust", "output_mode": "content", "line_numbers": True},
             "src/cli.rs:4:#[derive(Parser, Debug)]\ncrates/bench/src/main.rs:11:#[derive(Parser)]", None),
            ("Reading it.", "read_file", {"file_path": "src/cli.rs"}, numbered(CLI_RS),
             "Also make -v repeatable if that's easy: -vv for trace."),
            ("Adding a counted verbose flag and using it in init_logging.", "multi_edit",
             {"file_path": "src/cli.rs", "edits": [
                 {"old_string": "    #[arg(long = \"exclude\")]\n    pub excludes: Vec<String>,\n}",
                  "new_string": "    #[arg(long = \"exclude\")]\n    pub excludes: Vec<String>,\n    /// Log more: -v for debug, -vv for trace.\n"
                                "    #[arg(short, long, action = clap::ArgAction::Count)]\n    pub verbose: u8,\n}"},
                 {"old_string": "    let level = if args.dry_run { \"info\" } else { \"warn\" };",
                  "new_string": "    let level = match (args.verbose, args.dry_run) {\n        (0, false) => \"warn\",\n        (0, true) => \"info\",\n"
                                "        (1, _) => \"debug\",\n        _ => \"trace\",\n    };"}]},
             "Applied 2 edits to src/cli.rs:\n  edit 0: lines 25-28\n  edit 1: lines 31-36", None),
        ],
    },
    {
        "task": "Our C HTTP server's RSS grows by about 40 MB an hour under the load test. "
                "Find the leak. Don't change behaviour beyond fixing it.",
        "steps": [
            ("I'll start with a short run under valgrind in the background.", "bash",
             {"command": "make -C server debug && valgrind --leak-check=full --errors-for-leak-kinds=definite "
                         "./server/build/httpd --port 8089 --selftest 2000", "description": "Run the server self-test under valgrind",
              "timeout_ms": 300000},
             "cc -g -O0 -Wall -o build/httpd src/main.c src/server.c src/http.c src/router.c\n==31337== HEAP SUMMARY:\n"
             "==31337==     in use at exit: 8,192,000 bytes in 2,000 blocks\n==31337==   total heap usage: 58,114 allocs, 56,114 frees, 61,340,210 bytes allocated\n"
             "==31337== \n==31337== 8,192,000 bytes in 2,000 blocks are definitely lost in loss record 1 of 1\n"
             "==31337==    at 0x4848899: realloc (vg_replace_malloc.c:1451)\n==31337==    by 0x10B2F4: conn_read (server.c:97)\n"
             "==31337==    by 0x10B51A: on_readable (server.c:141)\n==31337==    by 0x10B8C0: server_run (server.c:203)\n"
             "==31337==    by 0x109E12: main (main.c:64)\n==31337== \n==31337== LEAK SUMMARY:\n==31337==    definitely lost: 8,192,000 bytes in 2,000 blocks\n"
             "==31337==    indirectly lost: 0 bytes in 0 blocks\n==31337== ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)", None),
            ("The input buffer from conn_read is lost. Reading the connection code.", "read_file",
             {"file_path": "server/src/server.c", "offset": 80, "limit": 50}, numbered(SERVER_C, 80), None),
            ("conn_close frees the body but never c->in, nor c itself. Checking where conns are allocated.", "grep",
             {"pattern": "calloc\\(1, sizeof \\*c\\)|conn_new", "path": "server/src", "output_mode": "content", "context": 2},
             "server/src/server.c-121-static struct conn *conn_new(struct server *s, int fd)\nserver/src/server.c-122-{\n"
             "server/src/server.c:123:    struct conn *c = calloc(1, sizeof *c);\nserver/src/server.c-124-    if (!c) return NULL;\n"
             "server/src/server.c-125-    c->fd = fd;", "Is the conn struct itself also leaked? valgrind only showed the buffer."),
            ("The struct is freed by the caller after conn_close (pool release), so only the buffer leaks. Fixing conn_close.", "edit_file",
             {"file_path": "server/src/server.c", "old_string": "    if (c->req.body) free(c->req.body);\n",
              "new_string": "    free(c->req.body);\n    free(c->in);\n    c->in = NULL;\n    c->in_len = c->in_cap = 0;\n"},
             "The file server/src/server.c has been updated. Here is the result of running `cat -n` on a snippet:\n"
             "    84\t    close(c->fd);\n    85\t    free(c->req.body);\n    86\t    free(c->in);\n    87\t    c->in = NULL;\n    88\t    c->in_len = c->in_cap = 0;", None),
        ],
    },
    {
        "task": "In notebooks/retention.ipynb, the cohort cell groups by calendar week but the product team "
                "wants ISO weeks starting on Monday. Update the cell and check pandas' docs for the right frequency alias.",
        "steps": [
            ("Reading the notebook.", "read_file", {"file_path": "notebooks/retention.ipynb"}, NOTEBOOK, None),
            ("Checking the frequency aliases in the pandas documentation.", "web_fetch",
             {"url": "https://pandas.pydata.org/docs/user_guide/timeseries.html#anchored-offsets",
              "prompt": "Which frequency alias gives weekly periods anchored on Monday, and what does plain 'W' anchor on?"},
             "Plain 'W' is an alias for 'W-SUN': weeks end on Sunday, so each bin is labelled by its Sunday. "
             "Weeks that start on Monday are expressed as 'W-SUN' with label='left' and closed='left' in a Grouper, "
             "or by using the anchored alias 'W-MON' for weeks ending on Monday. For ISO weeks, "
             "Series.dt.isocalendar() returns year, week and day columns.", "Use isocalendar, the team reports by ISO year-week."),
            ("Using isocalendar for ISO year-week cohorts.", "notebook_edit",
             {"notebook_path": "notebooks/retention.ipynb", "cell_id": "c3", "cell_type": "code",
              "new_source": "signups = df[df.event == 'signup']\niso = signups.ts.dt.isocalendar()\n"
                            "cohort = signups.groupby([iso.year, iso.week]).user_id.nunique()\ncohort.plot()"},
             "Updated cell c3 (code). Outputs cleared.", None),
            ("Running the notebook to check the cell executes.", "bash",
             {"command": "jupyter nbconvert --to notebook --execute --inplace notebooks/retention.ipynb",
              "description": "Execute the retention notebook in place"},
             "[NbConvertApp] Converting notebook notebooks/retention.ipynb to notebook\n"
             "[NbConvertApp] Writing 48211 bytes to notebooks/retention.ipynb", None),
        ],
    },
]


def load_fixture(path):
    with open(path) as f:
        d = json.load(f)
    return d["system"], d["tools"]


def openai_tools(tools):
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["parameters"]}} for t in tools]


def anthropic_tools(tools):
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def call_id(s, j):
    return "call_" + hashlib.sha1(f"{s}/{j}".encode()).hexdigest()[:20]


def openai_body(system, tools, sess, s, turn, max_tokens):
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": sess["task"]}]
    for j in range(turn):
        text, name, args, result, follow = sess["steps"][j]
        cid = call_id(s, j)
        msgs.append({"role": "assistant", "content": text,
                     "tool_calls": [{"id": cid, "type": "function",
                                     "function": {"name": name, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": result})
        if follow:
            msgs.append({"role": "user", "content": follow})
    return {"model": "forge-agent", "max_tokens": max_tokens, "temperature": 0, "stream": False,
            "tool_choice": "auto", "tools": openai_tools(tools), "messages": msgs}


def anthropic_body(system, tools, sess, s, turn, max_tokens):
    msgs = [{"role": "user", "content": [{"type": "text", "text": sess["task"]}]}]
    for j in range(turn):
        text, name, args, result, follow = sess["steps"][j]
        cid = "toolu_" + call_id(s, j)[5:]
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": text},
                                                      {"type": "tool_use", "id": cid, "name": name, "input": args}]})
        blocks = [{"type": "tool_result", "tool_use_id": cid, "content": result}]
        if follow:
            blocks.append({"type": "text", "text": follow})
        msgs.append({"role": "user", "content": blocks})
    # Claude Code stamps a per-request hash in a first system block; the server drops that
    # line, so the head stays the same across requests.
    stamp = hashlib.sha1(f"stamp/{s}/{turn}".encode()).hexdigest()[:5]
    billing = f"x-anthropic-billing-header: cc_version=2.0.14.{stamp}; cc_entrypoint=cli;"
    return {"model": "forge-agent", "max_tokens": max_tokens, "stream": False,
            "system": [{"type": "text", "text": billing}, {"type": "text", "text": system}],
            "tools": anthropic_tools(tools), "messages": msgs}


def interleave(n_sessions, n_turns, seed):
    """A seeded merge of the sessions' turn sequences; (0, 0) first."""
    rng = random.Random(seed)
    nxt = [0] * n_sessions
    order = [(0, 0)]
    nxt[0] = 1
    while len(order) < n_sessions * n_turns:
        live = [s for s in range(n_sessions) if nxt[s] < n_turns]
        s = rng.choice(live)
        order.append((s, nxt[s]))
        nxt[s] += 1
    return order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tools", default=os.path.join(HERE, "data", "agent_tools.json"))
    ap.add_argument("--out", required=True, help="the JSONL requests file")
    ap.add_argument("--meta", help="also write one {session, turn, api} JSON line per request here")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=4096, help="max_tokens in the bodies (replay may override)")
    a = ap.parse_args()
    if not 1 <= a.sessions <= len(SESSIONS):
        sys.exit(f"make_agent_workload: --sessions must be 1..{len(SESSIONS)}")
    if not 1 <= a.turns <= 1 + min(len(x["steps"]) for x in SESSIONS):
        sys.exit("make_agent_workload: --turns too large for the scripted sessions")
    system, tools = load_fixture(a.tools)
    meta = open(a.meta, "w") if a.meta else None
    with open(a.out, "w") as out:
        for s, turn in interleave(a.sessions, a.turns, a.seed):
            api = "openai" if s % 2 == 0 else "anthropic"
            mk = openai_body if api == "openai" else anthropic_body
            body = mk(system, tools, SESSIONS[s], s, turn, a.max_tokens)
            out.write(json.dumps({"api": api, "body": body}, ensure_ascii=False) + "\n")
            if meta:
                meta.write(json.dumps({"session": s, "turn": turn, "api": api}) + "\n")
    if meta:
        meta.close()


if __name__ == "__main__":
    main()
