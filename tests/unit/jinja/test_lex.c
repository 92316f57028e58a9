/*
 * test_lex.c — the lexer's rules (jinja.h, invariant 2): whitespace control, trim_blocks
 * and lstrip_blocks, comments, raw blocks, newlines, string and number literals.
 */
#include "jinja_test.h"

#include <criterion/criterion.h>

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
};

Test(jinja_lex, text_and_literals_match_jinja2)
{
    jinja_test_cases(CASES, HS_ARRAY_LEN(CASES));
}

Test(jinja_lex, errors_name_line_and_column)
{
    jinja_test_error("{{ 'abc }}", "line 1 column 4", "unterminated string");
    jinja_test_error("{# open comment", "line 1", "unterminated comment");
    jinja_test_error("a\n{{ 1 ", "line 2", "unexpected end of template");
    jinja_test_error("{{ '\\x4' }}", "line 1", "escape");
}
