/*
 * test_jinja.c — the Jinja interpreter, construct by construct. Every expected string was
 * produced by Python jinja2 with transformers' settings (tools/ref/render.py) and is
 * compared byte for byte; error cases must fail with a message that names the line.
 */
#include "jinja/jinja.h"

#include <criterion/criterion.h>
#include <string.h>

static const char *const CTX =
    "{\"xs\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": [1, \"x\"]}, \"s\": \"h\\u00e9llo\", \"n\": null, "
    "\"f\": 1.5, \"e\": [], \"m\": [{\"role\": \"user\", \"content\": \"hi\"}, "
    "{\"role\": \"tool\", \"content\": \"r1\"}, {\"role\": \"tool\", \"content\": \"r2\"}]}";

/* Render `tpl` with the JSON context; returns HS_OK and the text in *out (caller frees),
 * or the error code with the message in err. */
static int render(const char *tpl, const char *ctx_json, char **out, struct hs_err *err)
{
    json_error_t jerr;
    json_t *ctx = json_loads(ctx_json, 0, &jerr);
    cr_assert(ctx, "bad test context: %s", jerr.text);
    struct jinja_template *t = NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    hs_err_clear(err);
    int rc = jinja_compile(tpl, strlen(tpl), &t, err);
    if (rc == HS_OK)
        rc = jinja_render(t, ctx, &sb, err);
    jinja_free(t);
    json_decref(ctx);
    *out = rc == HS_OK ? strbuf_detach(&sb, NULL) : NULL;
    if (rc == HS_OK && !*out)
        *out = hs_strdup("");
    strbuf_free(&sb);
    return rc;
}

struct jcase {
    const char *name;
    const char *tpl;
    const char *expected; /* NULL: jinja2 raises */
};

static const struct jcase CASES[] = {
    {"trim_blocks", "{% if true %}\nx\n{% endif %}\ny", "x\ny"},
    {"lstrip_blocks", "a\n   {% if true %}\n   b\n   {% endif %}\nc", "a\n   b\nc"},
    {"lstrip_not_for_output", "  {{ 'x' }}\n  {% if true %}y{% endif %}", "  x\ny"},
    {"plus_disables_lstrip", "  {%+ if true %}y{% endif %}", "  y"},
    {"minus_strips_both", "a \n {%- if true -%} \n b \n {%- endif -%} \n c", "abc"},
    {"output_minus", "a  {{- 'b' -}}  c", "abc"},
    {"comment", "a {# note #} b\n  {# own line #}\nc", "a  b\nc"},
    {"comment_minus", "a {#- note -#} b", "ab"},
    {"raw", "{% raw %}{{ x }}{% if %}{% endraw %}", "{{ x }}{% if %}"},
    {"raw_minus", "{% raw -%}  {{ y }}  {%- endraw %}|", "{{ y }}|"},
    {"trailing_newline_dropped", "x\n", "x"},
    {"crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", "a\nb\n"},
    {"string_escapes", "{{ 'a\\nb\\t\\'c\\'' }}{{ \"\\u00e9\\x41\\101\\\\\" }}{{ 'x' 'y' }}{{ '\\z' }}", "a\nb\t'c'\303\251AA\\xy\\z"},
    {"numbers", "{{ 1_000 }} {{ 1.5 }} {{ 1e3 }} {{ 2.5e-3 }} {{ 12 }}", "1000 1.5 1000.0 0.0025 12"},
    {"python_scalars", "{{ 1.0 }} {{ 1e-7 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ true }} {{ none }} {{ 0.1 + 0.2 }} {{ -0.0 }}", "1.0 1e-07 1e+16 1000000000000000.0 0.0001 1e-05 True None 0.30000000000000004 -0.0"},
    {"python_containers", "{{ [1, 'a', \"it's\", none, true, 1.5, {'k': 'v'}] }} {{ (1, 2) }} {{ (1,) }} {{ d }}", "[1, 'a', \"it's\", None, True, 1.5, {'k': 'v'}] (1, 2) (1,) {'a': 1, 'b': [1, 'x']}"},
    {"repr_escapes", "{{ ['a\\nb', 'c\\\\d', '\\x00', '\\u00e9', 'q\"', \"q'\\\"\"] }}", "['a\\nb', 'c\\\\d', '\\x00', '\303\251', 'q\"', 'q\\'\"']"},
    {"undefined_prints_empty", "[{{ nothing }}][{{ d.zz }}][{{ xs[10] }}]", "[][][]"},
    {"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 4 / 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 3 * 'ab' }} {{ [0] * 2 }}", "3 -4 2 3.5 1024 0.5 2.0 3.0 0.5 ababab [0, 0]"},
    {"precedence", "{{ 10 // 3 * 2 ** 2 - -1 }} {{ 2 ** 3 ** 2 }} {{ xs|length - 1 }} {{ 1 ~ 2 * 3 }} {{ not 1 == 2 }}", "13 64 2 16 True"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ nothing ~ 1.0 ~ true }}", "a1None1.0True"},
    {"compare", "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ 'b' in 'abc' }}{{ 4 not in xs }}{{ 'a' in d }}{{ nothing == nothing }}", "TrueFalseTrueTrueTrueTrueTrueTrueTrue"},
    {"and_or_values", "{{ xs and 'yes' }}|{{ none or 0 or 'last' }}|{{ 0 and 1 }}|{{ e or 'empty' }}", "yes|last|0|empty"},
    {"condexpr", "{{ 'a' if xs else 'b' }}{{ 'a' if e else 'b' }}[{{ 'x' if n }}]{{ ('x' if n) is defined }}", "ab[]False"},
    {"subscript_slice", "{{ s[1] }}{{ s[-1] }}{{ s[::-1] }}{{ s[1:3] }}{{ xs[-1] }}{{ xs[::2] }}{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[2:0:-1] }}{{ xs[-10:10] }}", "\303\251ooll\303\251h\303\251l3[1, 3][2, 3][1, 2][3, 2, 1][3, 2][1, 2, 3]"},
    {"attr_vs_item", "{{ d.a }}{{ d['a'] }}{{ d.get('a') }}{{ d.get('zz', 7) }}{{ d.get('zz') }}{{ m[0].role }}{{ m[-1]['content'] }}", "1117Noneuserr2"},
    {"literals", "{{ [1, [2, 3]] }}{{ {'a': {'b': 1}} }}{{ () }}{{ True }}{{ False }}{{ None }}", "[1, [2, 3]]{'a': {'b': 1}}()TrueFalseNone"},
    {"string_methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}|{{ 'hello world'.title() }}|{{ 'abcabc'.count('b') }}{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}|{{ '-'.join(['a', 'b']) }}", "a b|a|a | a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|TrueTrueTrue|bba|HELLOhello|Hello World|22-1|a-b"},
    {"unicode_methods", "{{ s|length }}{{ s.upper() }}{{ s.find('l') }}{{ s|reverse }}", "5H\303\211LLO2oll\303\251h"},
    {"dict_methods", "{{ d.keys()|list }}{{ d.values()|list }}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "['a', 'b'][1, [1, 'x']]a=1;b=[1, 'x'];"},
    {"markup_add", "{{ (1|safe) + '<' }}|{{ '<'|e }}|{{ '<'|safe + '<' }}|{{ '<' + '>'|safe }}|{{ '<'|safe ~ '<' }}", "1&lt;|&lt;|<&lt;|&lt;>|<<"},
    {"type_tests", "{{ n is none }}{{ xs is sequence }}{{ d is mapping }}{{ s is string }}{{ xs is not string }}{{ f is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ true is true }}{{ false is false }}{{ d is iterable }}{{ 5 is iterable }}", "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse"},
    {"undefined_tests", "{{ nothing is defined }}{{ nothing is undefined }}{{ d.zz is defined }}{{ d.a is defined }}{{ nothing is sequence }}{{ nothing is iterable }}{{ nothing is mapping }}{{ nothing|length }}{{ 'a' in nothing }}", "FalseTrueFalseTrueTrueTrueFalse0False"},
    {"value_tests", "{{ 1 is odd }}{{ 2 is even }}{{ 6 is divisibleby 3 }}{{ 3 is eq 3 }}{{ 3 is gt 2 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ none is sameas none }}", "TrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    {"tojson", "{{ \"a\\nb\\t\\\"c\\\"\\\\\"|tojson }} {{ d|tojson }} {{ s|tojson }} {{ [1.0, 2e20, -0.0, 1e-5, none, true]|tojson }} {{ {'z': 1, 'a': 2}|tojson }}", "\"a\\nb\\t\\\"c\\\"\\\\\" {\"a\": 1, \"b\": [1, \"x\"]} \"h\303\251llo\" [1.0, 2e+20, -0.0, 1e-05, null, true] {\"z\": 1, \"a\": 2}"},
    {"tojson_options", "{{ d|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ s|tojson(ensure_ascii=true) }}|{{ [[], {}]|tojson(indent=1) }}", "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    \"x\"\n  ]\n}|{\"a\": 2, \"b\": 1}|{\"a\":1,\"b\":[1,\"x\"]}|\"h\\u00e9llo\"|[\n [],\n {}\n]"},
    {"strings", "{{ '  x  '|trim }}|{{ 'xax'|trim('x') }}|{{ 'abc'|upper }}{{ 'ABC'|lower }}|{{ 'hello world'|capitalize }}|{{ 'a-b c'|title }}|{{ 'aXa'|replace('a', 'b') }}|{{ 5|string }}{{ none|string }}{{ [1]|string }}", "x|a|ABCabc|Hello world|A-B C|bXb|5None[1]"},
    {"sequences", "{{ xs|length }}{{ xs|count }}{{ xs|first }}{{ xs|last }}{{ xs|join(', ') }}{{ 'abc'|list }}{{ xs|reverse|list }}{{ ['a', 'A', 'b']|unique|list }}{{ d|list }}", "33131, 2, 3['a', 'b', 'c'][3, 2, 1]['a', 'b']['a', 'b']"},
    {"items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{{ nothing|items|list }}", "a=1;b=[1, 'x'];[]"},
    {"default", "{{ nothing|default('dflt') }}{{ 'x'|default('y') }}{{ ''|default('z', true) }}{{ ''|d('w') }}", "dfltxz"},
    {"numbers", "{{ '3'|int + 1 }}{{ '3.7'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}{{ '2.5'|float }}{{ 3|float }}{{ -3|abs }}", "43052.53.03"},
    {"map_select", "{{ m|map(attribute='role')|list }}|{{ m|selectattr('role', 'equalto', 'tool')|map(attribute='content')|join(',') }}|{{ m|rejectattr('role', 'equalto', 'tool')|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3]|reject('odd')|list }}|{{ [1, 2]|map('string')|join('-') }}", "['user', 'tool', 'tool']|r1,r2|[{'role': 'user', 'content': 'hi'}]|[1, 3][2]|1-2"},
    {"if_elif_else", "{% for x in [0, 1, 2] %}{% if x == 0 %}zero{% elif x == 1 %}one{% else %}many{% endif %};{% endfor %}", "zero;one;many;"},
    {"for_loop_vars", "{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}", "01TrueFalse33;12FalseFalse32;23FalseTrue31;"},
    {"for_previtem_nextitem", "{% for x in m %}{{ loop.previtem.role if loop.previtem else '-' }}>{{ loop.nextitem.role if loop.nextitem else '-' }};{% endfor %}", "->tool;user>tool;tool>-;"},
    {"for_filter_else", "{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }};{% else %}none{% endfor %}|{% for x in e %}a{% else %}empty{% endfor %}", "1/2:2;2/2:3;|empty"},
    {"for_unpack_string_dict", "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}|{% for c in s %}[{{ c }}]{% endfor %}|{% for k in d %}{{ k }}{% endfor %}", "1234|[h][\303\251][l][l][o]|ab"},
    {"break_continue", "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", "13"},
    {"nested_loops", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", "113 214 1|123 224 2|"},
    {"loop_scope", "{% set y = 1 %}{% for x in xs %}[{{ y }}]{% set y = x * 10 %}({{ y }}){% endfor %}{{ y }}|{% for x in xs %}{% if loop.first %}{% set z = 5 %}{% endif %}[{{ z }}]{% endfor %}", "[1](10)[1](20)[1](30)1|[5][][]"},
    {"namespace", "{% set ns = namespace(a=1, found=false) %}{% for x in xs %}{% set ns.a = ns.a + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.a }}{{ ns.found }}[{{ ns.zz }}]", "7True[]"},
    {"set_tuple_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}{% set blk %}in {{ a }}{% endset %}[{{ blk }}]", "12(1, 2)[in 1]"},
    {"macro", "{% macro f(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }}|{{ f(1, 3) }}|{{ f(1, c=9) }}|{{ f(a=5) }}|{{ f() }}|{{ f|string }}", "121|131|129|525|2|<Macro 'f'>"},
    {"macro_scope", "{% macro m() %}{{ z }}{{ x }}{% endmacro %}{% set z = 3 %}{% for x in xs %}{{ m() }}{% endfor %}{% set cnt = namespace(v=0) %}{% macro inc() %}{% set cnt.v = cnt.v + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ cnt.v }}", "3332"},
    {"macro_result_filtered", "{% macro r(c) %}  {{ c }}  {% endmacro %}[{{ r('x')|trim }}]{% set v = r('y')|trim %}[{{ v }}]", "[x][y]"},
    {"range", "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}", "012[1, 4, 7][5, 3, 1]"},
    {"sorting", "{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(true) }}{{ ['b', 'A', 'a', 'B']|sort }}{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}{{ m|sort(attribute='content')|map(attribute='content')|list }}|{% for k, v in {'b': 1, 'A': 3, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}{% for k, v in {'x': 2, 'y': 1, 'z': 3}|dictsort(by='value', reverse=true) %}{{ k }}{{ v }}{% endfor %}|{{ xs|min }}{{ xs|max }}{{ ['b', 'A']|min }}[{{ e|min }}]{{ xs|sum }}{{ [1.5, 2]|sum }}{{ m|sum(attribute='content', start=[]) if false else '' }}", "[1, 2, 3][3, 2, 1]['A', 'a', 'b', 'B']['A', 'a', 'b']['hi', 'r1', 'r2']|A3a2b1z3x2y1|13A[]63.5"},
    {"indent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb\n'|indent(blank=true) }}|{{ ''|indent }}|{{ 'x\r\ny'|indent('> ') }}", "a\n    b\n\n    c|  a\n  b|a\n    \n    b\n    ||x\n> y"},
    {"str_format", "{{ '<a{}b>'.format('X') }}{{ '{0}-{0}-{1}'.format(1, 'z') }}{{ '{x}/{y}'.format(x=1, y=none) }}{{ '{{}} {}'.format([1]) }}{{ '{!r}'.format('q') }}", "<aXb>1-1-z1/None{} [1]'q'"},
    {"generators", "{{ xs|select('odd') is sequence }}{{ (e|select('odd')) and 'gen-true' }}{{ e|select('odd')|list and 'x' or 'empty' }}{{ d.items()|length }}{{ d.items() is sequence }}{{ xs|reverse|first }}{{ range(3)|length }}{{ range(5)[1] }}", "Falsegen-trueempty2False331"},
    {"undefined_in_list", "{% set l = [nothing, 1] %}{{ l|length }}{{ l[0] is defined }}{{ l[1] }}{{ [nothing] }}{{ nothing in [nothing] }}", "2False1[Undefined]True"},
    {"unknown_filter_in_if_is_lazy", "{% if false %}{{ x|no_such_filter }}{{ x is no_such_test }}{% endif %}ok", "ok"},
    {"unknown_filter_in_if_fails_when_run", "{% if true %}{{ x|no_such_filter }}{% endif %}", NULL},
    {"generator_tojson", "{{ xs|select('odd')|tojson }}", NULL},
    {"generator_length", "{{ d|items|length }}", NULL},
    {"undefined_in_list_tojson", "{{ [nothing]|tojson }}", NULL},
    {"sort_mixed", "{{ [1, 'a']|sort }}", NULL},
    {"undefined_attr", "line1\n{{ nothing.attr }}", NULL},
    {"concat_binds_looser_than_add", "{{ 1 + 2 ~ 3 }}", NULL},
    {"undefined_add", "{{ 'a' + nothing }}", NULL},
    {"raise_exception", "{{ 1 }}\n\n{{ raise_exception('No user query found.') }}", NULL},
    {"type_error", "{{ '1' + 1 }}", NULL},
    {"not_iterable", "{% for x in 5 %}{% endfor %}", NULL},
    {"in_none", "{{ 'a' in n }}", NULL},
    {"tojson_undefined", "{{ nothing|tojson }}", NULL},
    {"macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL},
    {"unpack_count", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", NULL},
    {"set_attr_non_namespace", "{% set x = 1 %}{% set x.y = 2 %}", NULL},
    {"compare_types", "{{ 1 < 'a' }}", NULL},
    {"call_undefined", "{{ nothing() }}", NULL},
};

Test(jinja_cases, all_constructs_match_jinja2)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(CASES); i++) {
        const struct jcase *c = &CASES[i];
        char *got = NULL;
        struct hs_err err = {0};
        int rc = render(c->tpl, CTX, &got, &err);
        if (c->expected) {
            cr_expect_eq(rc, HS_OK, "%s: failed: %s", c->name, err.msg);
            if (rc == HS_OK)
                cr_expect_str_eq(got, c->expected, "%s: rendered differently", c->name);
        } else {
            cr_expect_neq(rc, HS_OK, "%s: rendered '%s' where jinja2 raises", c->name, got ? got : "");
            cr_expect(strstr(err.msg, "line ") != NULL, "%s: message names no line: %s", c->name, err.msg);
        }
        hs_free(got);
    }
}

/* ---- error messages --------------------------------------------------------------------- */

static void expect_error(const char *tpl, const char *want1, const char *want2)
{
    char *got = NULL;
    struct hs_err err = {0};
    int rc = render(tpl, CTX, &got, &err);
    cr_assert_neq(rc, HS_OK, "'%s' rendered '%s'", tpl, got ? got : "");
    cr_expect(strstr(err.msg, want1) != NULL, "'%s' not in '%s'", want1, err.msg);
    if (want2)
        cr_expect(strstr(err.msg, want2) != NULL, "'%s' not in '%s'", want2, err.msg);
    hs_free(got);
}

Test(jinja_errors, compile_errors_name_line_and_column)
{
    expect_error("a\n{% if true %}\nb\n{% endfor %}", "line 4 column 4", "unexpected {% endfor %}");
    expect_error("{{ 1 +\n }}", "line 2 column 2", "unexpected");
    expect_error("x\n\n  {% for x in xs %}", "line 3", "missing {% endfor %}");
    expect_error("{{ 'abc }}", "line 1 column 4", "unterminated string");
    expect_error("{% include 'x' %}", "line 1", "include");
    expect_error("{{ xs|nosuchfilter }}", "line 1", "no filter named 'nosuchfilter'");
    expect_error("{{ xs is nosuchtest }}", "line 1", "no test named 'nosuchtest'");
    expect_error("{% break %}", "line 1", "outside of a loop");
    expect_error("{# open comment", "line 1", "unterminated comment");
}

Test(jinja_errors, runtime_errors_name_the_line)
{
    expect_error("ok\n{% if true %}\n{{ raise_exception('No user query found in messages.') }}\n{% endif %}",
                 "line 3", "No user query found in messages.");
    expect_error("a\nb\n{{ nothing.role }}", "line 3", "'nothing' is undefined");
    expect_error("{% for x in xs %}\n{{ x + 'a' }}{% endfor %}", "line 2", "unsupported operand");
    expect_error("{% macro m() %}\n\n{{ 1 // 0 }}{% endmacro %}{{ m() }}", "line 3", "division");
}

Test(jinja_errors, deep_nesting_is_an_error_not_a_crash)
{
    expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "line 1", "nested too deeply");
    /* the parser and the evaluator bound their recursion: hostile templates cannot
     * exhaust the stack */
    struct strbuf sb;
    strbuf_init(&sb);
    const char *shapes[][3] = {
        {"{{ ", "(", ") }}"}, {"{{ ", "not ", "1 }}"}, {"{{ ", "- ", "1 }}"},
        {"", "{% if true %}", "{% endif %}"}, {"{{ 1", "+1", " }}"}, {"{{ d", ".a", " }}"},
    };
    for (size_t k = 0; k < HS_ARRAY_LEN(shapes); k++) {
        strbuf_reset(&sb);
        strbuf_puts(&sb, shapes[k][0]);
        for (int i = 0; i < 5000; i++)
            strbuf_puts(&sb, shapes[k][1]);
        if (k == 0)
            strbuf_puts(&sb, "1");
        for (int i = 0; k == 0 || k == 3 ? i < 5000 : i < 1; i++)
            strbuf_puts(&sb, k == 0 ? ")" : k == 3 ? "{% endif %}" : shapes[k][2]);
        if (k == 0)
            strbuf_puts(&sb, " }}");
        expect_error(sb.buf, "line 1", "nested too deeply");
    }
    strbuf_free(&sb);
}

/* ---- tojson ----------------------------------------------------------------------------- */

static void expect_tojson(const char *json, int indent, const char *want)
{
    json_error_t jerr;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &jerr);
    cr_assert(v, "bad JSON %s", json);
    struct strbuf sb;
    strbuf_init(&sb);
    jinja_tojson(v, indent, &sb);
    cr_expect_str_eq(sb.buf, want);
    strbuf_free(&sb);
    json_decref(v);
}

Test(jinja_tojson, python_json_dumps_bytes)
{
    /* expected strings: python3 -c 'import json; print(json.dumps(x, ensure_ascii=False))' */
    expect_tojson("{\"b\": 1, \"a\": [1.0, 1e-7, 1e16, 1e15, 123456789012345678, -0.0, 0.1]}", -1,
                  "{\"b\": 1, \"a\": [1.0, 1e-07, 1e+16, 1000000000000000.0, 123456789012345678, -0.0, 0.1]}");
    expect_tojson("\"q\\\" b\\\\ n\\n t\\t c\\u0001 d\\u007f \\u00e9 \\u2028 \\ud83d\\ude00\"", -1,
                  "\"q\\\" b\\\\ n\\n t\\t c\\u0001 d\x7f \xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80\"");
    expect_tojson("[true, false, null, {}, [], {\"k\": {}}]", -1, "[true, false, null, {}, [], {\"k\": {}}]");
    expect_tojson("{\"a\": [1, {\"b\": null}], \"c\": []}", 2,
                  "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": []\n}");
    expect_tojson("[1e300, 2.5e-5, 1.5e16, 9007199254740993]", -1,
                  "[1e+300, 2.5e-05, 1.5e+16, 9007199254740993]");
}

Test(jinja_api, template_renders_many_times_identically)
{
    const char *tpl = "{% for x in xs %}{{ x }}{% endfor %}{{ d|tojson }}";
    struct jinja_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(jinja_compile(tpl, strlen(tpl), &t, &err), HS_OK, "%s", err.msg);
    json_t *ctx = json_loads(CTX, 0, NULL);
    struct strbuf a, b;
    strbuf_init(&a);
    strbuf_init(&b);
    cr_assert_eq(jinja_render(t, ctx, &a, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(jinja_render(t, ctx, &b, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(a.len, b.len);
    cr_expect_eq(memcmp(a.buf, b.buf, a.len), 0);
    cr_expect_str_eq(a.buf, "123{\"a\": 1, \"b\": [1, \"x\"]}");
    /* rendering appends */
    cr_assert_eq(jinja_render(t, ctx, &a, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(a.len, 2 * b.len);
    strbuf_free(&a);
    strbuf_free(&b);
    json_decref(ctx);
    jinja_free(t);
    jinja_free(NULL);
}

Test(jinja_api, non_object_context_is_rejected)
{
    struct jinja_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(jinja_compile("x", 1, &t, &err), HS_OK);
    json_t *arr = json_array();
    struct strbuf sb;
    strbuf_init(&sb);
    cr_expect_neq(jinja_render(t, arr, &sb, &err), HS_OK);
    cr_expect_eq(sb.len, 0);
    json_decref(arr);
    jinja_free(t);
}

Test(jinja_api, failed_render_appends_nothing)
{
    struct jinja_template *t = NULL;
    struct hs_err err = {0};
    const char *tpl = "partial output {{ raise_exception('stop') }}";
    cr_assert_eq(jinja_compile(tpl, strlen(tpl), &t, &err), HS_OK);
    json_t *ctx = json_object();
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "kept");
    cr_expect_neq(jinja_render(t, ctx, &sb, &err), HS_OK);
    cr_expect_str_eq(sb.buf, "kept");
    strbuf_free(&sb);
    json_decref(ctx);
    jinja_free(t);
}
