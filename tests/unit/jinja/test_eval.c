/*
 * test_eval.c — rendering: statements, scoping, loops, macros, arithmetic, subscripts and
 * Undefined; runtime errors name the line; the public API's contract (pure, appending,
 * all or nothing).
 */
#include "jinja_test.h"

#include <criterion/criterion.h>
#include <string.h>

static const struct jcase CASES[] = {
    {"undefined_prints_empty", "[{{ nothing }}][{{ d.zz }}][{{ xs[10] }}]", "[][][]"},
    {"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 4 / 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 3 * 'ab' }} {{ [0] * 2 }}", "3 -4 2 3.5 1024 0.5 2.0 3.0 0.5 ababab [0, 0]"},
    {"subscript_slice", "{{ s[1] }}{{ s[-1] }}{{ s[::-1] }}{{ s[1:3] }}{{ xs[-1] }}{{ xs[::2] }}{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[2:0:-1] }}{{ xs[-10:10] }}", "\303\251ooll\303\251h\303\251l3[1, 3][2, 3][1, 2][3, 2, 1][3, 2][1, 2, 3]"},
    {"attr_vs_item", "{{ d.a }}{{ d['a'] }}{{ d.get('a') }}{{ d.get('zz', 7) }}{{ d.get('zz') }}{{ m[0].role }}{{ m[-1]['content'] }}", "1117Noneuserr2"},
    {"markup_add", "{{ (1|safe) + '<' }}|{{ '<'|e }}|{{ '<'|safe + '<' }}|{{ '<' + '>'|safe }}|{{ '<'|safe ~ '<' }}", "1&lt;|&lt;|<&lt;|&lt;>|<<"},
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
    {"undefined_attr", "line1\n{{ nothing.attr }}", NULL},
    {"undefined_add", "{{ 'a' + nothing }}", NULL},
    {"type_error", "{{ '1' + 1 }}", NULL},
    {"not_iterable", "{% for x in 5 %}{% endfor %}", NULL},
    {"in_none", "{{ 'a' in n }}", NULL},
    {"macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL},
    {"unpack_count", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", NULL},
    {"set_attr_non_namespace", "{% set x = 1 %}{% set x.y = 2 %}", NULL},
    {"call_undefined", "{{ nothing() }}", NULL},
};

Test(jinja_eval, constructs_match_jinja2)
{
    jinja_test_cases(CASES, HS_ARRAY_LEN(CASES));
}

Test(jinja_eval, runtime_errors_name_the_line)
{
    jinja_test_error("ok\n{% if true %}\n{{ raise_exception('No user query found in messages.') }}\n{% endif %}",
                     "line 3", "No user query found in messages.");
    jinja_test_error("a\nb\n{{ nothing.role }}", "line 3", "'nothing' is undefined");
    jinja_test_error("{% for x in xs %}\n{{ x + 'a' }}{% endfor %}", "line 2", "unsupported operand");
    jinja_test_error("{% macro m() %}\n\n{{ 1 // 0 }}{% endmacro %}{{ m() }}", "line 3", "division");
    jinja_test_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "line 1", "nested too deeply");
}

Test(jinja_eval, template_renders_many_times_identically)
{
    const char *tpl = "{% for x in xs %}{{ x }}{% endfor %}{{ d|tojson }}";
    struct jinja_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(jinja_compile(tpl, strlen(tpl), &t, &err), HS_OK, "%s", err.msg);
    json_t *ctx = json_loads(JINJA_TEST_CTX, 0, NULL);
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

Test(jinja_eval, non_object_context_is_rejected)
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

Test(jinja_eval, failed_render_appends_nothing)
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
