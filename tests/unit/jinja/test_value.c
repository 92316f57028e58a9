/*
 * test_value.c — values as Python prints and compares them: str(), repr(), float repr,
 * containers, Undefined inside containers, and json.dumps (jinja_tojson and the tojson
 * filter).
 */
#include "jinja_test.h"

#include <criterion/criterion.h>

static const struct jcase CASES[] = {
    {"python_scalars", "{{ 1.0 }} {{ 1e-7 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ true }} {{ none }} {{ 0.1 + 0.2 }} {{ -0.0 }}", "1.0 1e-07 1e+16 1000000000000000.0 0.0001 1e-05 True None 0.30000000000000004 -0.0"},
    {"python_containers", "{{ [1, 'a', \"it's\", none, true, 1.5, {'k': 'v'}] }} {{ (1, 2) }} {{ (1,) }} {{ d }}", "[1, 'a', \"it's\", None, True, 1.5, {'k': 'v'}] (1, 2) (1,) {'a': 1, 'b': [1, 'x']}"},
    {"repr_escapes", "{{ ['a\\nb', 'c\\\\d', '\\x00', '\\u00e9', 'q\"', \"q'\\\"\"] }}", "['a\\nb', 'c\\\\d', '\\x00', '\303\251', 'q\"', 'q\\'\"']"},
    {"tojson", "{{ \"a\\nb\\t\\\"c\\\"\\\\\"|tojson }} {{ d|tojson }} {{ s|tojson }} {{ [1.0, 2e20, -0.0, 1e-5, none, true]|tojson }} {{ {'z': 1, 'a': 2}|tojson }}", "\"a\\nb\\t\\\"c\\\"\\\\\" {\"a\": 1, \"b\": [1, \"x\"]} \"h\303\251llo\" [1.0, 2e+20, -0.0, 1e-05, null, true] {\"z\": 1, \"a\": 2}"},
    {"undefined_in_list", "{% set l = [nothing, 1] %}{{ l|length }}{{ l[0] is defined }}{{ l[1] }}{{ [nothing] }}{{ nothing in [nothing] }}", "2False1[Undefined]True"},
    {"generator_tojson", "{{ xs|select('odd')|tojson }}", NULL},
    {"undefined_in_list_tojson", "{{ [nothing]|tojson }}", NULL},
    {"sort_mixed", "{{ [1, 'a']|sort }}", NULL},
    {"tojson_undefined", "{{ nothing|tojson }}", NULL},
    {"compare_types", "{{ 1 < 'a' }}", NULL},
};

Test(jinja_value, printing_matches_python)
{
    jinja_test_cases(CASES, HS_ARRAY_LEN(CASES));
}

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

Test(jinja_value, tojson_is_python_json_dumps_bytes)
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
