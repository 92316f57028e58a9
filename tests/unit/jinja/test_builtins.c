/*
 * test_builtins.c — the builtin table: filters, tests, methods and global functions as
 * Python and Jinja2 define them; names outside the table; how strings are walked
 * character by character, valid UTF-8 or not.
 */
#include "jinja_test.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const struct jcase CASES[] = {
    {"string_methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}|{{ 'hello world'.title() }}|{{ 'abcabc'.count('b') }}{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}|{{ '-'.join(['a', 'b']) }}", "a b|a|a | a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|TrueTrueTrue|bba|HELLOhello|Hello World|22-1|a-b"},
    {"unicode_methods", "{{ s|length }}{{ s.upper() }}{{ s.find('l') }}{{ s|reverse }}", "5H\303\211LLO2oll\303\251h"},
    {"dict_methods", "{{ d.keys()|list }}{{ d.values()|list }}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "['a', 'b'][1, [1, 'x']]a=1;b=[1, 'x'];"},
    {"type_tests", "{{ n is none }}{{ xs is sequence }}{{ d is mapping }}{{ s is string }}{{ xs is not string }}{{ f is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ true is true }}{{ false is false }}{{ d is iterable }}{{ 5 is iterable }}", "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse"},
    {"undefined_tests", "{{ nothing is defined }}{{ nothing is undefined }}{{ d.zz is defined }}{{ d.a is defined }}{{ nothing is sequence }}{{ nothing is iterable }}{{ nothing is mapping }}{{ nothing|length }}{{ 'a' in nothing }}", "FalseTrueFalseTrueTrueTrueFalse0False"},
    {"value_tests", "{{ 1 is odd }}{{ 2 is even }}{{ 6 is divisibleby 3 }}{{ 3 is eq 3 }}{{ 3 is gt 2 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ none is sameas none }}", "TrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    {"tojson_options", "{{ d|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ s|tojson(ensure_ascii=true) }}|{{ [[], {}]|tojson(indent=1) }}", "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    \"x\"\n  ]\n}|{\"a\": 2, \"b\": 1}|{\"a\":1,\"b\":[1,\"x\"]}|\"h\\u00e9llo\"|[\n [],\n {}\n]"},
    {"strings", "{{ '  x  '|trim }}|{{ 'xax'|trim('x') }}|{{ 'abc'|upper }}{{ 'ABC'|lower }}|{{ 'hello world'|capitalize }}|{{ 'a-b c'|title }}|{{ 'aXa'|replace('a', 'b') }}|{{ 5|string }}{{ none|string }}{{ [1]|string }}", "x|a|ABCabc|Hello world|A-B C|bXb|5None[1]"},
    {"sequences", "{{ xs|length }}{{ xs|count }}{{ xs|first }}{{ xs|last }}{{ xs|join(', ') }}{{ 'abc'|list }}{{ xs|reverse|list }}{{ ['a', 'A', 'b']|unique|list }}{{ d|list }}", "33131, 2, 3['a', 'b', 'c'][3, 2, 1]['a', 'b']['a', 'b']"},
    {"items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{{ nothing|items|list }}", "a=1;b=[1, 'x'];[]"},
    {"default", "{{ nothing|default('dflt') }}{{ 'x'|default('y') }}{{ ''|default('z', true) }}{{ ''|d('w') }}", "dfltxz"},
    {"numbers", "{{ '3'|int + 1 }}{{ '3.7'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}{{ '2.5'|float }}{{ 3|float }}{{ -3|abs }}", "43052.53.03"},
    {"map_select", "{{ m|map(attribute='role')|list }}|{{ m|selectattr('role', 'equalto', 'tool')|map(attribute='content')|join(',') }}|{{ m|rejectattr('role', 'equalto', 'tool')|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3]|reject('odd')|list }}|{{ [1, 2]|map('string')|join('-') }}", "['user', 'tool', 'tool']|r1,r2|[{'role': 'user', 'content': 'hi'}]|[1, 3][2]|1-2"},
    {"range", "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}", "012[1, 4, 7][5, 3, 1]"},
    {"sorting", "{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(true) }}{{ ['b', 'A', 'a', 'B']|sort }}{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}{{ m|sort(attribute='content')|map(attribute='content')|list }}|{% for k, v in {'b': 1, 'A': 3, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}{% for k, v in {'x': 2, 'y': 1, 'z': 3}|dictsort(by='value', reverse=true) %}{{ k }}{{ v }}{% endfor %}|{{ xs|min }}{{ xs|max }}{{ ['b', 'A']|min }}[{{ e|min }}]{{ xs|sum }}{{ [1.5, 2]|sum }}{{ m|sum(attribute='content', start=[]) if false else '' }}", "[1, 2, 3][3, 2, 1]['A', 'a', 'b', 'B']['A', 'a', 'b']['hi', 'r1', 'r2']|A3a2b1z3x2y1|13A[]63.5"},
    {"indent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb\n'|indent(blank=true) }}|{{ ''|indent }}|{{ 'x\r\ny'|indent('> ') }}", "a\n    b\n\n    c|  a\n  b|a\n    \n    b\n    ||x\n> y"},
    {"str_format", "{{ '<a{}b>'.format('X') }}{{ '{0}-{0}-{1}'.format(1, 'z') }}{{ '{x}/{y}'.format(x=1, y=none) }}{{ '{{}} {}'.format([1]) }}{{ '{!r}'.format('q') }}", "<aXb>1-1-z1/None{} [1]'q'"},
    {"generators", "{{ xs|select('odd') is sequence }}{{ (e|select('odd')) and 'gen-true' }}{{ e|select('odd')|list and 'x' or 'empty' }}{{ d.items()|length }}{{ d.items() is sequence }}{{ xs|reverse|first }}{{ range(3)|length }}{{ range(5)[1] }}", "Falsegen-trueempty2False331"},
    {"unknown_filter_in_if_is_lazy", "{% if false %}{{ x|no_such_filter }}{{ x is no_such_test }}{% endif %}ok", "ok"},
    {"unknown_filter_in_if_fails_when_run", "{% if true %}{{ x|no_such_filter }}{% endif %}", NULL},
    {"generator_length", "{{ d|items|length }}", NULL},
    {"raise_exception", "{{ 1 }}\n\n{{ raise_exception('No user query found.') }}", NULL},
};

Test(jinja_builtins, filters_tests_methods_match_jinja2)
{
    jinja_test_cases(CASES, HS_ARRAY_LEN(CASES));
}

Test(jinja_builtins, one_name_per_kind)
{
    /* "lower", "upper" and "count" are filters, tests and methods at once, each its own row */
    static const struct jcase same_names[] = {
        {"lower", "{{ 'aB'|lower }}{{ 'ab' is lower }}{{ 'aB'.lower() }}", "abTrueab"},
        {"upper", "{{ 'aB'|upper }}{{ 'AB' is upper }}{{ 'aB'.upper() }}", "ABTrueAB"},
        {"count", "{{ xs|count }}{{ 'aaa'.count('a') }}{{ [1, 2, 1].count(1) }}", "332"},
        {"items", "{{ d|items|list }}{{ d.items()|list }}", "[['a', 1], ['b', [1, 'x']]][['a', 1], ['b', [1, 'x']]]"},
        {"method_is_not_a_filter", "{{ 'a'|strip }}", NULL},
        {"filter_is_not_a_method", "{{ 'a'.trim() }}", NULL},
        {"test_is_not_a_filter", "{{ 1|odd }}", NULL},
        {"unknown_filter_in_map", "{{ xs|map('nosuch')|list }}", NULL},
        {"unknown_test_in_select", "{{ xs|select('nosuch')|list }}", NULL},
        {"map_of_nothing_never_looks", "{{ e|map('nosuch')|list }}", "[]"},
    };
    jinja_test_cases(same_names, HS_ARRAY_LEN(same_names));
}

/* Text that is not valid UTF-8 can reach a string only through a template's own bytes
 * (contexts and literals are checked by jansson); each such byte is one character, the
 * same one for every walk. */
Test(jinja_builtins, invalid_utf8_bytes_are_one_character_each)
{
    static const struct { const char *x, *want; } cases[] = {
        {"a\x80" "b", "3|b\x80" "a|\x80|b\x80" "a|[a][\x80][b]"},
        {"\xc0\xa0z", "3|z\xa0\xc0|\xa0|z\xa0\xc0|[\xc0][\xa0][z]"},
        {"h\xc3\xa9\xe2", "3|\xe2\xc3\xa9h|\xc3\xa9|\xe2\xc3\xa9h|[h][\xc3\xa9][\xe2]"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char tpl[256], *got = NULL;
        struct hs_err err = {0};
        snprintf(tpl, sizeof(tpl), "{%% set x %%}%s{%% endset %%}{{ x|length }}|{{ x|reverse }}|{{ x[1] }}|{{ x[::-1] }}|"
                 "{%% for c in x %%}[{{ c }}]{%% endfor %%}", cases[i].x);
        cr_assert_eq(jinja_test_render(tpl, JINJA_TEST_CTX, &got, &err), HS_OK, "%s", err.msg);
        cr_expect(strcmp(got, cases[i].want) == 0, "case %zu: got '%s'", i, got);
        hs_free(got);
    }
}
