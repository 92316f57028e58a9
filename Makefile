# headstart — GNU Make build. `make help` lists the targets.
#
# Layout: every src/<module>/*.c goes into build/libheadstart.a; the command line, src/cli/*.c,
# links it into build/headstart. Unit tests: tests/unit/<module>/*.c link into build/tests/unit_<module>
# (Criterion). Files named *_avx2.c / *_avxvnni.c / *_avx512.c get their ISA flags; nothing else does.

CC       ?= cc
BUILD    ?= build
MODULES  := base sys kernels format tokenizer model mkmodel engine bank jinja api text server
WERROR   ?= 0

CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN     += -Werror
endif
OPT      ?= -O2 -g
CFLAGS   := $(CSTD) $(WARN) $(OPT) -ffp-contract=off -fno-fast-math -Isrc -MMD -MP
LDLIBS   := -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -lpthread -lsqlite3 -lxxhash -lcrypto -lhiredis
# ISA flags only where the compiler targets x86-64; elsewhere the SIMD files build empty
ARCH     := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)
ifeq ($(ARCH),x86_64)
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avxvnni := $(ISA_avx2) -mavxvnni
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c
endif

SRC      := $(foreach m,$(MODULES),$(wildcard src/$(m)/*.c))
GEN_SRC  := $(BUILD)/gen/chat_template.c
OBJ      := $(SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/chat_template.o
LIB      := $(BUILD)/libheadstart.a
BIN      := $(BUILD)/headstart

TEST_MODULES := $(notdir $(patsubst %/,%,$(wildcard tests/unit/*/)))
TEST_BINS    := $(foreach m,$(TEST_MODULES),$(BUILD)/tests/unit_$(m))

ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_OBJ   := $(SRC:%.c=$(BUILD)/asan/obj/%.o) $(BUILD)/asan/obj/gen/chat_template.o
ASAN_LIB   := $(BUILD)/asan/libheadstart.a
ASAN_TESTS := $(foreach m,$(TEST_MODULES),$(BUILD)/asan/tests/unit_$(m))

# ThreadSanitizer: the suites whose code runs threads (the engine thread and the HTTP
# threads, the bank's background writer, the thread pool); -O1 keeps its run short.
TSAN_MODULES := server bank sys
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJ   := $(SRC:%.c=$(BUILD)/tsan/obj/%.o) $(BUILD)/tsan/obj/gen/chat_template.o
TSAN_LIB   := $(BUILD)/tsan/libheadstart.a
TSAN_TESTS := $(foreach m,$(TSAN_MODULES),$(BUILD)/tsan/tests/unit_$(m))

# Fuzz corpus replay: each tests/fuzz/fuzz_NAME.c linked with replay_main.c, normal flags
REPLAY_BINS := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/tests/replay_%,$(wildcard tests/fuzz/fuzz_*.c))

isa_flags = $(if $(findstring _avx512,$(1)),$(ISA_avx512),$(if $(findstring _avxvnni,$(1)),$(ISA_avxvnni),$(if $(findstring _avx2,$(1)),$(ISA_avx2))))

.PHONY: all deps test unit asan tsan fuzz demo bench clean help check-includes check-docs
all: $(BIN)

help:
	@echo "make            build build/headstart and build/libheadstart.a"
	@echo "make deps       install the Debian and npm packages the project needs (idempotent)"
	@echo "make test       deps, build, every test; ends with an 'N passed, N failed' line"
	@echo "make asan       unit tests under AddressSanitizer + UBSan"
	@echo "make tsan       the threaded suites (server, bank, sys) under ThreadSanitizer"
	@echo "make fuzz       short libFuzzer runs of the file-format and request-parser harnesses"
	@echo "make demo       build, make a tiny model, inspect it"
	@echo "make bench      headstart vs llama.cpp speed table, JSON + PNG in bench/results (long; bench/README.md)"
	@echo "make compile_commands.json   the compilation database for clangd and clang-tidy (bear)"
	@echo "make clean      remove build/"

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(call isa_flags,$<) -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The Qwen3.5 chat template ships inside the llama.cpp source bundle of the npm package;
# it is embedded at build time and never committed. Without it mkmodel asks for
# --chat-template.
$(GEN_SRC): tools/embed_template.sh $(wildcard node_modules/node-llama-cpp/llama/gitRelease.bundle)
	@mkdir -p $(dir $@)
	sh tools/embed_template.sh $(BUILD) $@

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

# the cli module is the top of the tree: in the binary, not the library
CLI_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/cli/*.c))
$(BIN): $(CLI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CLI_OBJ) $(LIB) $(LDLIBS) -o $@

# ---- tests -----------------------------------------------------------------------------
.SECONDEXPANSION:
$(BUILD)/tests/unit_%: $$(wildcard tests/unit/%/*.c) $$(wildcard tests/unit/%/*.h) $(wildcard tests/unit/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(filter %.c %.o,$^) $(LIB) $(LDLIBS) -lcriterion -o $@

# the cli is not in the library: its tests link the option parser's object
$(BUILD)/tests/unit_cli: $(BUILD)/obj/src/cli/opt.o
$(BUILD)/asan/tests/unit_cli: $(BUILD)/asan/obj/src/cli/opt.o

$(BUILD)/asan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) $(call isa_flags,$<) -c $< -o $@

$(BUILD)/asan/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -c $< -o $@

$(ASAN_LIB): $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/asan/tests/unit_%: $$(wildcard tests/unit/%/*.c) $$(wildcard tests/unit/%/*.h) $(wildcard tests/unit/*.h) $(ASAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -Itests $(filter %.c %.o,$^) $(ASAN_LIB) $(LDLIBS) -lcriterion -o $@

$(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $^ $(LDLIBS) -o $@

$(BUILD)/tsan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O1 $(TSAN_FLAGS) $(call isa_flags,$<) -c $< -o $@

$(BUILD)/tsan/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O1 $(TSAN_FLAGS) -c $< -o $@

$(TSAN_LIB): $(TSAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Criterion cannot start under TSan: these suites get tests/tsan/ (its criterion.h and runner)
$(BUILD)/tsan/tests/unit_%: $$(wildcard tests/unit/%/*.c) $$(wildcard tests/unit/%/*.h) $(wildcard tests/unit/*.h) $(wildcard tests/tsan/*.c tests/tsan/criterion/*.h) $(TSAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O1 $(TSAN_FLAGS) -Itests/tsan -Itests $(filter %.c %.o,$^) $(TSAN_LIB) $(LDLIBS) -o $@

unit: $(TEST_BINS) $(BIN)
	@sh tools/run_tests.sh --unit-only $(BUILD)

# deps first, then a fresh make (so rules that look at node_modules see it installed)
test: deps
	@$(MAKE) --no-print-directory check-includes $(BIN) $(TEST_BINS) $(REPLAY_BINS)
	@sh tools/run_tests.sh $(BUILD)

asan: $(ASAN_TESTS)
	@sh tools/run_tests.sh --asan $(BUILD)

tsan: $(TSAN_TESTS)
	@sh tools/run_tests.sh --tsan $(BUILD)

check-includes:
	@sh tools/check_includes.sh

check-docs:
	@sh tools/check_docs.sh

# The compilation database of a full build of the library, the command and the unit tests,
# as bear records it: a from-scratch build in $(BUILD)/ccdb, so that every file is compiled
# while it listens and build/ is left alone (the generated template source stays there).
compile_commands.json: Makefile
	rm -rf $(BUILD)/ccdb
	bear --output $@ -- $(MAKE) --no-print-directory BUILD=$(BUILD)/ccdb $(BUILD)/ccdb/headstart \
		$(foreach m,$(TEST_MODULES),$(BUILD)/ccdb/tests/unit_$(m))

# ---- fuzzing (clang libFuzzer) -------------------------------------------------------------
FUZZ_TIME ?= 20
FUZZ_SRC  := $(SRC) $(GEN_SRC)
fuzz: $(GEN_SRC)
	@sh tools/run_fuzz.sh $(BUILD) $(FUZZ_TIME)

# ---- dependencies ------------------------------------------------------------------------
deps:
	@sh tools/deps.sh

demo: deps
	@$(MAKE) --no-print-directory $(BIN)
	@sh tools/demo.sh $(BUILD)

# headstart vs llama.cpp, rooflines, capture cost; BENCH_* variables limit it (bench/README.md)
bench: deps
	@$(MAKE) --no-print-directory $(BIN)
	@sh bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)

-include $(OBJ:.o=.d) $(ASAN_OBJ:.o=.d) $(TSAN_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
