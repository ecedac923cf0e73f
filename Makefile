# Makefile: build libds.so; deps, test, example, bench targets.
CC      ?= cc
MARCH   ?= x86-64-v3
BLASDIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
CFLAGS  ?= -O3 -march=$(MARCH)
CFLAGS  += -std=gnu11 -fPIC -fopenmp -ffp-contract=off -fno-math-errno -fno-trapping-math -Wall -Wextra -Wno-unused-parameter -Isrc
LDFLAGS += -shared -fopenmp -Wl,-z,nodelete -L$(BLASDIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLASDIR) -lz -lm
SRCS    := $(wildcard src/*.c)
HDRS    := $(wildcard src/*.h src/*.def src/*.inc)
BUSTED  := busted
BUILD   ?= build
DEPS    := gcc libc6-dev luajit2 libluajit2-5.1-dev libopenblas-dev libopenblas0-openmp lua-cjson lua-busted \
           zlib1g-dev dataset-fashion-mnist luarocks python3 nginx libnginx-mod-http-lua curl wrk graphviz \
           lua-readline tmux librsvg2-bin
DS_LIB_PATH = $(abspath $(BUILD))/libds.so
ASAN_LIB_PATH = $(abspath $(BUILD))/asan/libds.so
RUN_LUA = DS_LIB=$(DS_LIB_PATH) LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" luajit
# Benchmarks use OpenBLAS's AVX-512 kernels unless the user chose a core type (same for ds and PyTorch).
OPENBLAS_CORETYPE ?= SkylakeX
BENCH_THREADS ?= 2

.PHONY: all deps test test-asan example repl bench install clean

all: $(BUILD)/libds.so

$(BUILD)/libds.so: $(SRCS) $(HDRS)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) $(SRCS) -o $@ $(LDFLAGS)

$(BUILD)/asan/libds.so: $(SRCS) $(HDRS)
	@mkdir -p $(BUILD)/asan
	$(CC) -O1 -g -march=$(MARCH) -fsanitize=address,undefined -fno-omit-frame-pointer \
	  $(filter-out -O3 -march=$(MARCH),$(CFLAGS)) $(SRCS) -o $@ $(LDFLAGS) -fsanitize=address,undefined

# Install missing Debian packages (idempotent; as root or through sudo).
deps:
	@missing=""; for p in $(DEPS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# The whole suite; its last line is "N passed, N failed" (tools/busted_summary.lua).
test: deps all
	DS_LIB=$(DS_LIB_PATH) $(BUSTED)

# The whole suite on an AddressSanitizer + UBSan build (LuaJIT itself is not instrumented: preload the runtimes).
# DS_ALLOC=c keeps small tensors in C memory too, where ASan sees them; allocator_may_return_null lets the
# "allocation too large" tests see NULL (as without ASan) instead of an abort.
test-asan: deps all $(BUILD)/asan/libds.so
	DS_ALLOC=c DS_LIB=$(ASAN_LIB_PATH) ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD=$$($(CC) -print-file-name=libasan.so):$$($(CC) -print-file-name=libubsan.so) $(BUSTED)

# docs/API.md from the op table, the exported functions and the nn registry (tests/api_doc_spec.lua checks it)
.PHONY: api-doc
api-doc: all
	$(RUN_LUA) tools/gen_api.lua

# The main job: train LeNet-5 (1 epoch; EPOCHS=5 for the full recipe), trace, compile, save, load, predict.
EPOCHS ?= 1
example: deps all
	$(RUN_LUA) examples/pipeline.lua --epochs $(EPOCHS)

# The ds prompt (bin/ds): values printed, completion, history, ?help
repl: deps all
	bin/ds

# Small-op latency and GEMM against OpenBLAS, PyTorch and the measured FMA peak; writes bench/RESULTS.md.
$(BUILD)/peak_flops: bench/peak_flops.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -fopenmp $< -o $@

bench: DEPS += python3-torch
bench: deps all $(BUILD)/peak_flops
	OPENBLAS_CORETYPE=$(OPENBLAS_CORETYPE) OMP_NUM_THREADS=$(BENCH_THREADS) OPENBLAS_NUM_THREADS=$(BENCH_THREADS) \
	  PEAK_FLOPS=$(BUILD)/peak_flops $(RUN_LUA) bench/run.lua $(BENCH_THREADS)

# Used by `luarocks make rocks/ds-scm-1.rockspec`: lua/ds with ds.h and libds.so next to its files.
INST_LUADIR ?= /usr/local/share/lua/5.1
INST_BINDIR ?= /usr/local/bin
install: all
	mkdir -p $(INST_LUADIR) $(INST_BINDIR)
	cp -r lua/ds $(INST_LUADIR)/
	cp src/ds.h $(BUILD)/libds.so $(INST_LUADIR)/ds/
	cp bin/ds $(INST_BINDIR)/ds

clean:
	rm -rf build

# Render the graph traced by examples/simple_net.lua to SVG with Graphviz (Debian's graphviz package).
.PHONY: graph-demo
graph-demo: all
	@command -v dot >/dev/null || { echo "graph-demo needs Graphviz's dot: apt-get install graphviz"; exit 1; }
	@mkdir -p $(BUILD)/graph-demo
	$(RUN_LUA) examples/simple_net.lua --dot $(BUILD)/graph-demo/simple_net.dot
	dot -Tsvg $(BUILD)/graph-demo/simple_net.dot -o $(BUILD)/graph-demo/simple_net.svg
	@echo "SVG: $(BUILD)/graph-demo/simple_net.svg"

# C embedding example: run a graph saved by ds.save with no Lua (src/model.c, docs/FORMAT.md)
.PHONY: embed
embed: $(BUILD)/predict
$(BUILD)/predict: examples/embed/predict.c src/ds.h $(BUILD)/libds.so
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Isrc examples/embed/predict.c -o $@ -L$(BUILD) -l:libds.so -Wl,-rpath,$(abspath $(BUILD))

# Serve the saved LeNet-5 and BERT-style models over HTTP with nginx + its Lua module (examples/serve/).
SERVE_PORT ?= 8089
SERVE_DIR  ?= $(BUILD)/serve
.PHONY: serve serve-models serve-test serve-bench
serve-models: deps all
	@mkdir -p $(SERVE_DIR)
	$(RUN_LUA) examples/serve/export_models.lua $(SERVE_DIR)/models
serve: serve-models
	@echo "serving on http://127.0.0.1:$(SERVE_PORT) (/predict, /predict/bert, /health); Ctrl-C stops"
	examples/serve/serve.sh $(SERVE_DIR)/nginx $(SERVE_PORT) $(SERVE_DIR)/models foreground
serve-test: deps all
	$(BUSTED) tests/serve_spec.lua
# wrk load tests of the served models (bench/serve_bench.sh): about 9 x SERVE_BENCH_SECONDS plus export and warm-up
SERVE_BENCH_SECONDS ?= 10
serve-bench: deps all
	DS_LIB=$(DS_LIB_PATH) bench/serve_bench.sh $(SERVE_BENCH_SECONDS)

# Loader fuzzers (tests/fuzz/): libFuzzer over ds.load's graph + params files (LuaJIT embedded) and over the
# C loader's plan + params files (ds_model_load_bytes), on a clang ASan + UBSan build of libds, from seed
# corpora of saved models, FUZZ_SECONDS each. Any finding fails (its input is left in $(BUILD)/fuzz).
FUZZ_SECONDS ?= 30
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -O1 -g -march=$(MARCH) -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# clang ignores "#pragma GCC target": the AVX-512 sources get the features on their command line instead
FUZZ_AVX512  := -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma
fuzz: DEPS += clang libclang-rt-14-dev libomp-14-dev
$(BUILD)/fuzz/%.o: src/%.c $(HDRS)
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(if $(findstring avx512,$*),$(FUZZ_AVX512)) -fsanitize=fuzzer-no-link -std=gnu11 -fPIC \
	  -ffp-contract=off -fno-math-errno -fno-trapping-math -Wno-unknown-pragmas -Wno-unknown-attributes -Isrc -c $< -o $@
$(BUILD)/fuzz/libds.so: $(SRCS:src/%.c=$(BUILD)/fuzz/%.o)
	$(FUZZ_CC) $(FUZZ_FLAGS) $^ -o $@ -shared -L$(BLASDIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLASDIR) -lz -lm \
	  $$(gcc -print-file-name=libgomp.so)
$(BUILD)/fuzz/%_fuzz: tests/fuzz/%_fuzz.c src/ds.h $(BUILD)/fuzz/libds.so
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -Isrc -I/usr/include/luajit-2.1 $< -o $@ \
	  -L$(BUILD)/fuzz -l:libds.so -Wl,-rpath,$(abspath $(BUILD))/fuzz -lluajit-5.1
.PHONY: fuzz
fuzz: deps all $(BUILD)/fuzz/graph_fuzz $(BUILD)/fuzz/plan_fuzz
	rm -rf $(BUILD)/fuzz/seeds && $(RUN_LUA) tests/fuzz/make_seeds.lua $(BUILD)/fuzz/seeds >/dev/null
	@for t in graph plan; do \
	  mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	  echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  DS_ROOT=$(CURDIR) DS_LIB=$(abspath $(BUILD))/fuzz/libds.so DS_ALLOC=c \
	  $(BUILD)/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=262144 -timeout=20 \
	    -artifact_prefix=$(BUILD)/fuzz/$$t- -print_final_stats=1 $(BUILD)/fuzz/corpus-$$t $(BUILD)/fuzz/seeds/$$t \
	    >$(BUILD)/fuzz/$$t.log 2>&1; rc=$$?; \
	  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|INFO: seed corpus" $(BUILD)/fuzz/$$t.log; \
	  [ $$rc = 0 ] || { tail -n 60 $(BUILD)/fuzz/$$t.log; echo "fuzz $$t: FINDING (see $(BUILD)/fuzz/$$t-*)"; exit 1; }; \
	done
