/* replay_main.c — runs a libFuzzer harness once on each file named on the command line,
 * without libFuzzer: the corpus replay of `make test` (tests/fuzz/replay.sh).
 *
 * Design note
 * -----------
 * Linked with one tests/fuzz/fuzz_NAME.c and build/libheadstart.a by the normal compiler
 * and flags, so every committed input, crash inputs included, is proven harmless on the
 * build users run, not only under clang's sanitizers.
 *   1. The harness is called exactly as libFuzzer calls it: LLVMFuzzerInitialize first
 *      (when the harness has one), then LLVMFuzzerTestOneInput on a buffer of exactly the
 *      file's size (a fresh allocation per input, so a read past the end can fault under
 *      ASan and is never satisfied by the previous input's bytes).
 *   2. A harness reports a finding by crashing or aborting; the replay adds nothing to that
 *      verdict. A nonzero return is libFuzzer's "do not add to the corpus", not a failure.
 *   3. One line per input on stderr ("replay: FILE (N bytes)") before it runs, so a crash
 *      names its input; the exit status is 0 only when every file was read and run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* weak: most harnesses have no initializer */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* The whole file in a buffer of exactly its size (a 1-byte allocation when empty, passed
 * with size 0). NULL when it cannot be read. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc(n > 0 ? (size_t)n : 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    }
    fclose(f);
    *size = buf ? (size_t)n : 0;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: %s FILE...\n", argv[0]); return 2; }
    /* the initializer may rewrite argc/argv (libFuzzer's flags); the file list is ours */
    int n_files = argc - 1;
    char **files = argv + 1;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0;
    for (int i = 0; i < n_files; i++) {
        size_t size;
        uint8_t *data = read_file(files[i], &size);
        if (!data) { fprintf(stderr, "replay: %s: cannot read\n", files[i]); bad = 1; continue; }
        fprintf(stderr, "replay: %s (%zu bytes)\n", files[i], size);
        LLVMFuzzerTestOneInput(data, size);
        free(data);
    }
    return bad;
}
