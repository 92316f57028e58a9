/*
 * jinja_render — development tool: render a Jinja template with a JSON context through
 * headstart's interpreter, for comparison with tools/ref/render.py.
 *
 *   jinja_render TEMPLATE_FILE CONTEXT_JSON_FILE     prints the rendering (no newline added)
 *
 * Exit status 1 with the error on stderr when compiling or rendering fails, 2 on bad usage
 * or unreadable files.
 */
#include "jinja/jinja.h"

#include <stdio.h>
#include <stdlib.h>

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        strbuf_append(&sb, buf, n);
    fclose(f);
    if (!sb.buf)
        strbuf_append(&sb, "", 0);
    return strbuf_detach(&sb, len);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: jinja_render TEMPLATE_FILE CONTEXT_JSON_FILE\n");
        return 2;
    }
    size_t len;
    char *src = read_all(argv[1], &len);
    if (!src) {
        fprintf(stderr, "jinja_render: cannot read %s\n", argv[1]);
        return 2;
    }
    json_error_t jerr;
    json_t *ctx = json_load_file(argv[2], JSON_DECODE_ANY, &jerr);
    if (!ctx) {
        fprintf(stderr, "jinja_render: %s: line %d: %s\n", argv[2], jerr.line, jerr.text);
        hs_free(src);
        return 2;
    }
    struct hs_err err = {0};
    struct jinja_template *t = NULL;
    struct strbuf out;
    strbuf_init(&out);
    int rc = jinja_compile(src, len, &t, &err);
    if (rc == HS_OK)
        rc = jinja_render(t, ctx, &out, &err);
    if (rc == HS_OK)
        fwrite(out.buf ? out.buf : "", 1, out.len, stdout);
    else
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
    strbuf_free(&out);
    jinja_free(t);
    json_decref(ctx);
    hs_free(src);
    return rc == HS_OK ? 0 : 1;
}
