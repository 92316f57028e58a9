/*
 * test_parse.c — the grammar: operator precedence, literals, statements, and compile
 * errors that name the line and column; hostile nesting fails cleanly.
 */
#include "jinja_test.h"

#include <criterion/criterion.h>

static const struct jcase CASES[] = {
    {"precedence", "{{ 10 // 3 * 2 ** 2 - -1 }} {{ 2 ** 3 ** 2 }} {{ xs|length - 1 }} {{ 1 ~ 2 * 3 }} {{ not 1 == 2 }}", "13 64 2 16 True"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ nothing ~ 1.0 ~ true }}", "a1None1.0True"},
    {"compare", "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ 'b' in 'abc' }}{{ 4 not in xs }}{{ 'a' in d }}{{ nothing == nothing }}", "TrueFalseTrueTrueTrueTrueTrueTrueTrue"},
    {"and_or_values", "{{ xs and 'yes' }}|{{ none or 0 or 'last' }}|{{ 0 and 1 }}|{{ e or 'empty' }}", "yes|last|0|empty"},
    {"condexpr", "{{ 'a' if xs else 'b' }}{{ 'a' if e else 'b' }}[{{ 'x' if n }}]{{ ('x' if n) is defined }}", "ab[]False"},
    {"literals", "{{ [1, [2, 3]] }}{{ {'a': {'b': 1}} }}{{ () }}{{ True }}{{ False }}{{ None }}", "[1, [2, 3]]{'a': {'b': 1}}()TrueFalseNone"},
    {"concat_binds_looser_than_add", "{{ 1 + 2 ~ 3 }}", NULL},
};

Test(jinja_parse, expressions_match_jinja2)
{
    jinja_test_cases(CASES, HS_ARRAY_LEN(CASES));
}

Test(jinja_parse, compile_errors_name_line_and_column)
{
    jinja_test_error("a\n{% if true %}\nb\n{% endfor %}", "line 4 column 4", "unexpected {% endfor %}");
    jinja_test_error("{{ 1 +\n }}", "line 2 column 2", "unexpected");
    jinja_test_error("x\n\n  {% for x in xs %}", "line 3", "missing {% endfor %}");
    jinja_test_error("{% include 'x' %}", "line 1", "include");
    jinja_test_error("{{ xs|nosuchfilter }}", "line 1", "no filter named 'nosuchfilter'");
    jinja_test_error("{{ xs is nosuchtest }}", "line 1", "no test named 'nosuchtest'");
    jinja_test_error("{% break %}", "line 1", "outside of a loop");
}

Test(jinja_parse, deep_nesting_is_an_error_not_a_crash)
{
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
        jinja_test_error(sb.buf, "line 1", "nested too deeply");
    }
    strbuf_free(&sb);
}
