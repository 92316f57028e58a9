#!/usr/bin/env python3
# render.py — the reference chat-template renderer: Debian's python3-jinja2 configured
# exactly as transformers' chat_template_utils._compile_jinja_template does it
# (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a tojson that is
# json.dumps with ensure_ascii=False and insertion-ordered keys, raise_exception and
# strftime_now globals). headstart's Jinja interpreter must match it byte for byte.
#
#   /usr/bin/python3 tools/ref/render.py TEMPLATE CONTEXT.json
#       print the rendering (no newline added); exit 1 with the error on stderr.
#   /usr/bin/python3 tools/ref/render.py --expand CONVERSATIONS.json CTX_DIR
#       write one context file per conversation x add_generation_prompt x enable_thinking
#       (the context chat.c builds: messages, tools only when non-empty,
#       add_generation_prompt, enable_thinking only when set, eos_token).
#   /usr/bin/python3 tools/ref/render.py --batch TEMPLATE CTX_DIR OUT_DIR
#       render every CTX_DIR/*.json into OUT_DIR/NAME.out, or OUT_DIR/NAME.err on error.
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_template(path):
    with open(path, encoding="utf-8") as f:
        return make_env().from_string(f.read())


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def expand(conv_path, ctx_dir):
    os.makedirs(ctx_dir, exist_ok=True)
    convs = load_json(conv_path)
    n = 0
    for conv in convs:
        for agp in (True, False):
            for think in (None, True, False):
                ctx = {"messages": conv["messages"]}
                if conv.get("tools"):
                    ctx["tools"] = conv["tools"]
                ctx["add_generation_prompt"] = agp
                if think is not None:
                    ctx["enable_thinking"] = think
                ctx["eos_token"] = "<|im_end|>"
                name = "%s.agp%d.think%s" % (conv["name"], int(agp),
                                              "U" if think is None else int(think))
                with open(os.path.join(ctx_dir, name + ".json"), "w", encoding="utf-8") as f:
                    json.dump(ctx, f, ensure_ascii=False)
                n += 1
    print(n)


def batch(template_path, ctx_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    try:
        tpl = load_template(template_path)
    except Exception as e:  # a template jinja2 cannot compile: every case is an error
        tpl, compile_error = None, e
    for fn in sorted(os.listdir(ctx_dir)):
        if not fn.endswith(".json"):
            continue
        base = os.path.join(out_dir, fn[:-5])
        try:
            if tpl is None:
                raise compile_error
            text = tpl.render(**load_json(os.path.join(ctx_dir, fn)))
            with open(base + ".out", "wb") as f:
                f.write(text.encode("utf-8", "surrogatepass"))
        except Exception as e:
            with open(base + ".err", "w", encoding="utf-8") as f:
                f.write("%s: %s\n" % (type(e).__name__, e))


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "--expand":
        expand(a[1], a[2])
    elif len(a) == 4 and a[0] == "--batch":
        batch(a[1], a[2], a[3])
    elif len(a) == 2:
        try:
            text = load_template(a[0]).render(**load_json(a[1]))
        except Exception as e:
            sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
            sys.exit(1)
        sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))
    else:
        sys.stderr.write(__doc__ if __doc__ else "usage: see the header of render.py\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
