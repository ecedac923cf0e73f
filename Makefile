# Makefile: build libds.so; deps, test, example, bench targets.
CC      ?= cc
MARCH   ?= x86-64-v3
BLASDIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
CFLAGS  ?= -O3 -march=$(MARCH)
CFLAGS  += -std=gnu11 -fPIC -fopenmp -ffp-contract=off -fno-math-errno -Wall -Wextra -Wno-unused-parameter -Isrc
LDFLAGS += -shared -fopenmp -Wl,-z,nodelete -L$(BLASDIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLASDIR) -lz -lm
SRCS    := $(wildcard src/*.c)
HDRS    := $(wildcard src/*.h src/*.def src/*.inc)
BUSTED  := busted
BUILD   ?= build
DEPS    := luajit2 libluajit2-5.1-dev libopenblas-dev libopenblas0-openmp lua-cjson lua-busted zlib1g-dev dataset-fashion-mnist

.PHONY: all deps test test-asan example bench clean

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
	@missing=""; for p in $(DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

test: deps all
	$(BUSTED)

test-asan: deps $(BUILD)/asan/libds.so
	DS_LIB=$(BUILD)/asan/libds.so ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD=$$($(CC) -print-file-name=libasan.so):$$($(CC) -print-file-name=libubsan.so) $(BUSTED)

example: deps all
	luajit examples/tour.lua

bench: deps all
	luajit bench/run.lua

clean:
	rm -rf build
