# slabkit — GNU Makefile.  `make` builds the library, tools and benchmarks;
# `make test` runs the TAP suite under prove; `make bench` runs the benches.
# Switches: CC=clang, O=0 (debug, asserts on), PREFIX=/usr/local for install.

CC      ?= cc
CXX     ?= c++
O       ?= 2
PREFIX  ?= /usr/local
B       := build

WARN    := -Wall -Wextra -Werror
# -mcx16: the slab free path uses cmpxchg16b on (freelist, counters).
# -fstack-usage: `make stack` reads the .su files (see tools/checkstack).
ARCH    := -mcx16
BASE    := -std=gnu11 -O$(O) -g $(WARN) $(ARCH) -fPIC -pthread \
           -fno-plt -fvisibility=hidden -fstack-usage -Iinclude -Isrc
ifeq ($(O),0)
BASE    += -DSK_DEBUG=1
endif
CFLAGS  ?=
ALLCFLAGS := $(BASE) $(CFLAGS)
# Programs (tests, benchmarks, tools) are not part of `make stack`.
PROGCFLAGS := $(filter-out -fstack-usage -fvisibility=hidden,$(ALLCFLAGS))
TSANFLAGS := $(filter-out -fstack-usage,$(BASE)) -O1 -fsanitize=thread -DSK_TSAN=1

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
LIB_HDR := $(wildcard include/*.h src/*/*.h)

TEST_SRC := $(sort $(wildcard tests/*/*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
TEST_CXX := $(sort $(wildcard tests/*/*.cc))
TEST_CXXBIN := $(TEST_CXX:tests/%.cc=$(B)/tests/%)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
# bench/workloads/*.c are plain malloc programs: they link no allocator, so
# each run picks one with LD_PRELOAD (slabkit, glibc, jemalloc, tcmalloc,
# mimalloc).  bench/*.c call the sk_* API and link the static library.
WL_SRC := $(sort $(wildcard bench/workloads/*.c))
WL_BIN := $(WL_SRC:bench/workloads/%.c=$(B)/bench/workloads/%)
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_BIN := $(TOOL_SRC:tools/%.c=$(B)/tools/%)

# ThreadSanitizer build: the library without the malloc layer (TSan owns
# malloc) and with the tests named in TSAN_TESTS; they run with rseq off,
# since TSan cannot see the kernel's restart guarantee (docs/design.md).
TSAN_LIB_SRC := $(filter-out src/malloc/%,$(LIB_SRC))
TSAN_LIB_OBJ := $(TSAN_LIB_SRC:%.c=$(B)/tsan/obj/%.o)
TSAN_TESTS   := $(sort $(wildcard tests/*/*_tsan.c) $(shell grep -l 'TSAN: yes' tests/*/*.c 2>/dev/null))
TSAN_BIN     := $(TSAN_TESTS:tests/%.c=$(B)/tsan/tests/%)

# Keep the TSan objects (make would delete them as intermediate files).
.SECONDARY:

.PHONY: all lib test test-tsan bench bench-deps install clean stack check-stack
all: lib $(TEST_BIN) $(TEST_CXXBIN) $(BENCH_BIN) $(WL_BIN) $(TOOL_BIN) $(B)/slabkit

lib: $(B)/libslabkit.so $(B)/libslabkit.a $(B)/slabkit.pc

$(B)/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c $< -o $@

$(B)/libslabkit.so: $(LIB_OBJ)
	$(CC) -shared -pthread -Wl,-soname,libslabkit.so -Wl,-z,now -o $@ $(LIB_OBJ)

$(B)/libslabkit.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

$(B)/slabkit.pc: tools/slabkit.pc.in
	@mkdir -p $(B)
	sed 's|@PREFIX@|$(PREFIX)|g' $< > $@

$(B)/slabkit: tools/slabkit.sh
	@mkdir -p $(B)
	cp $< $@ && chmod +x $@

# Unit tests link the static library: they may call layer-internal functions.
$(B)/tests/%: tests/%.c $(wildcard tests/*.h tests/*/*.h) $(B)/libslabkit.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Itests -o $@ $< $(B)/libslabkit.a -lm

$(B)/tests/%: tests/%.cc $(B)/libslabkit.so
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -Wall -Wextra -Werror -pthread -Iinclude -o $@ $<

$(B)/bench/%: bench/%.c bench/bench.h $(B)/libslabkit.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Ibench -o $@ $< $(B)/libslabkit.a -lm

$(B)/bench/workloads/%: bench/workloads/%.c bench/bench.h $(wildcard bench/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -pthread -Ibench -o $@ $< -lm

$(B)/tools/%: tools/%.c $(B)/libslabkit.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -o $@ $< $(B)/libslabkit.a

$(B)/tsan/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(TSANFLAGS) -c $< -o $@

$(B)/tsan/tests/%: tests/%.c $(wildcard tests/*.h tests/*/*.h) $(TSAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TSANFLAGS) -Itests -o $@ $< $(TSAN_LIB_OBJ) -lm

test: all $(TSAN_BIN)
	@tests/run

test-tsan: $(TSAN_BIN)
	@tests/run tsan

# On a fresh machine (as root) the peers and tools are installed first;
# without root, missing ones are skipped with a note.
bench: all
	@missing=; for l in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do \
	    ldconfig -p 2>/dev/null | grep -q "$$l" || missing=1; done; \
	command -v valgrind >/dev/null && command -v gnuplot >/dev/null || missing=1; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
	    echo "make bench: installing the peer allocators and tools (bench/deps)"; bench/deps; fi
	@bench/run

bench-deps:
	bench/deps

stack: lib
	@tools/checkstack $(B)/obj

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(B)/libslabkit.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/libslabkit.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/slabkit.h $(DESTDIR)$(PREFIX)/include/
	sed 's|@PREFIX@|$(PREFIX)|g' tools/slabkit.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/slabkit.pc
	sed 's|^LIB=.*|LIB=$(PREFIX)/lib/libslabkit.so|' tools/slabkit.sh > $(DESTDIR)$(PREFIX)/bin/slabkit
	chmod 755 $(DESTDIR)$(PREFIX)/bin/slabkit

clean:
	rm -rf $(B)
