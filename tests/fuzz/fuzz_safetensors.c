/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader.
 *
 * The reader takes a path (it maps files), so each input is written to one temp file that
 * lives for the whole run and is removed at exit. A successful open is walked (every
 * view's bytes are read, so a view outside its mapping trips ASan) and freed; the
 * metadata lookup is exercised too. Nothing may leak: LeakSanitizer runs at exit.
 *
 * Build (clang): clang -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Isrc, this
 * file plus the sources of src/format, src/base and src/sys, -ljansson -lm -lpthread.
 * Seeds: tests/fuzz/corpus/safetensors/ (made by tests/fuzz/gen_safetensors_corpus.py).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_path[64];

static void fz_cleanup(void)
{
    if (fz_path[0]) unlink(fz_path);
}

static const char *fz_file(void)
{
    if (!fz_path[0]) {
        strcpy(fz_path, "/tmp/hs_fuzz_st_XXXXXX");
        int fd = mkstemp(fz_path);
        if (fd < 0) { perror("mkstemp"); abort(); }
        close(fd);
        atexit(fz_cleanup);
    }
    return fz_path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file();
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0) abort();
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    close(fd);

    struct tensor_set *ts = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    if (safetensors_open(path, &ts, &err) != HS_OK) {
        if (ts || err.code == HS_OK || !err.msg[0]) abort(); /* a failure must say why */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < tensor_set_count(ts); i++) {
        const struct tensor_view *v = tensor_set_at(ts, i);
        const uint8_t *p = v->data;
        for (uint64_t b = 0; b < v->n_bytes; b++) sink ^= p[b];
        if (tensor_set_find(ts, v->name) != v) abort();
    }
    (void)sink;
    (void)safetensors_metadata(ts, "format");
    tensor_set_free(ts);
    return 0;
}
