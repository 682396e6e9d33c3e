# slabkit — GNU Makefile.  `make` builds the library, tools and benchmarks;
# `make test` runs the TAP suite under prove; `make bench` runs the benches.
# Switches: CC=clang, O=0 (debug, asserts on); for install and uninstall,
# PREFIX (/usr/local), LIBDIR, BINDIR, INCLUDEDIR, MANDIR and DESTDIR.
# `make deb` builds the Debian packages (dpkg-buildpackage) and runs lintian.
# `make asan` builds the AddressSanitizer variant into $(B)/asan: the library
# without malloc, sk_cache objects poisoned (libslabkit.a, to link with
# -fsanitize=address), and the tests marked `ASAN: yes`; `make test-asan`
# runs them (`make test` does too).

CC      ?= cc
CXX     ?= c++
O       ?= 2
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
BINDIR  ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
B       := build

# The shared library: soname libslabkit.so.0, the file libslabkit.so.$(VERSION),
# the sk_* API versioned by tools/libslabkit.map.
VERSION := 0.1.0
SONAME  := libslabkit.so.0
LDFLAGS ?=

WARN    := -Wall -Wextra -Werror
# -mcx16: the slab free path uses cmpxchg16b on (freelist, counters).
# -fstack-usage: `make stack` reads the .su files (see tools/checkstack).
ARCH    := -mcx16
BASE    := -std=gnu11 -O$(O) -g $(WARN) $(ARCH) -fPIC -pthread \
           -fno-plt -fvisibility=hidden -fstack-usage -Iinclude -Isrc
ifeq ($(O),0)
BASE    += -DSK_DEBUG=1
endif
# GCC 12 at -O1 threads jumps through the asm goto of cpu_pop_fast and
# drops the sequence (malloc then stores to NULL + 8); -O0, -O2 and clang
# are right.  Keep its jump threading off there.
ifeq ($(O),1)
BASE    += $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),,-fno-thread-jumps)
endif
CFLAGS  ?=
CPPFLAGS ?=
ALLCFLAGS := $(BASE) $(CPPFLAGS) $(CFLAGS)
# Programs (tests, benchmarks, tools) are not part of `make stack`.
PROGCFLAGS := $(filter-out -fstack-usage -fvisibility=hidden,$(ALLCFLAGS))
TSANFLAGS := $(filter-out -fstack-usage,$(BASE)) -O1 -fsanitize=thread -DSK_TSAN=1

# own_begin.c first and own_end.c last: their markers bracket slabkit's own
# writable data in every section (src/os/own_begin.c; the leak scan skips it).
OWN_MARKS := src/os/own_begin.c src/os/own_end.c
LIB_SRC := src/os/own_begin.c $(sort $(filter-out $(OWN_MARKS),$(wildcard src/*/*.c))) src/os/own_end.c
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
# What the tools share: reading another process (remote.c) and the table
# sources of their reports (source.c); docs/inspect.md.
TOOL_LIB_SRC := $(sort $(wildcard tools/inspect/*.c))
TOOL_LIB_OBJ := $(TOOL_LIB_SRC:tools/%.c=$(B)/tools/obj/%.o)
TOOL_HDR := $(wildcard tools/inspect/*.h)

# ThreadSanitizer build: the library without the malloc layer (TSan owns
# malloc) and with the tests named in TSAN_TESTS; they run with rseq off,
# since TSan cannot see the kernel's restart guarantee (docs/design.md).
TSAN_LIB_SRC := $(filter-out src/malloc/%,$(LIB_SRC))
TSAN_LIB_OBJ := $(TSAN_LIB_SRC:%.c=$(B)/tsan/obj/%.o)
TSAN_TESTS   := $(sort $(wildcard tests/*/*_tsan.c) $(shell grep -l 'TSAN: yes' tests/*/*.c 2>/dev/null))
TSAN_BIN     := $(TSAN_TESTS:tests/%.c=$(B)/tsan/tests/%)

# AddressSanitizer build: the library without the malloc layer (ASan owns
# malloc), in which every sk_cache's free objects are poisoned (src/slab/
# poison.h), and the tests marked `ASAN: yes`.  rseq stays on (ASan does
# not instrument the sequences' asm), and so does the build's -O level:
# GCC 12 at -O1 miscompiles cpu_pop_fast's asm goto (a pop that reports
# success with no object; -O0 and -O2 are right).
ASANFLAGS    := $(filter-out -fstack-usage,$(BASE)) -fsanitize=address -fno-omit-frame-pointer
ASAN_LIB_OBJ := $(TSAN_LIB_SRC:%.c=$(B)/asan/obj/%.o)
ASAN_TESTS   := $(sort $(shell grep -l 'ASAN: yes' tests/*/*.c 2>/dev/null))
ASAN_BIN     := $(ASAN_TESTS:tests/%.c=$(B)/asan/tests/%)

# Keep the TSan and ASan objects (make would delete them as intermediate files).
.SECONDARY: $(TSAN_LIB_OBJ) $(ASAN_LIB_OBJ)

.PHONY: build all lib tools check test test-tsan asan test-asan bench bench-deps install uninstall deb clean stack check-stack kernel-tests
# `make`: the library and the tools, what a user builds (seconds); `make
# all` adds every test and benchmark program (make test and make bench
# build what they run).
build: lib tools
all: lib $(TEST_BIN) $(TEST_CXXBIN) $(BENCH_BIN) $(WL_BIN) tools

lib: $(B)/libslabkit.so $(B)/libslabkit.a $(B)/libslabkit_internal.a $(B)/slabkit.pc
tools: $(TOOL_BIN) $(B)/slabkit $(B)/tools/slabkit-symbolize

# Each object depends on the headers it includes (-MMD: build/obj/*.d),
# so an edit of slab_fast.h recompiles what includes it, not the library.
# An object without its .d (a tree built before these rules, or a .d
# removed) is rebuilt: the empty rule below makes a missing .d new.
DEPFLAGS = -MMD -MP
$(B)/obj/%.o: %.c $(B)/obj/%.d
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(DEPFLAGS) -c $< -o $@

# One relocatable object of the whole library, its objects in LIB_OBJ's
# order: each section of it is one piece, bracketed by own_begin's and
# own_end's markers.  libslabkit.so and libslabkit_internal.a are made of
# it as it is; libslabkit.a of a copy with the hidden symbols made local.
$(B)/obj/slabkit-all.o: $(LIB_OBJ)
	$(CC) -r -nostdlib -o $@ $(LIB_OBJ)

# --sort-section=name: the big zero arrays' .bss.sk_big after the .bss,
# so the small variables share a few pages (SK_BIG_BSS).
$(B)/libslabkit.so.$(VERSION): $(B)/obj/slabkit-all.o tools/libslabkit.map
	$(CC) -shared -pthread -Wl,-soname,$(SONAME) -Wl,--version-script=tools/libslabkit.map \
	    -Wl,-z,now -Wl,--sort-section=name $(LDFLAGS) -o $@ $(B)/obj/slabkit-all.o

$(B)/$(SONAME): $(B)/libslabkit.so.$(VERSION)
	ln -sf libslabkit.so.$(VERSION) $@

$(B)/libslabkit.so: $(B)/$(SONAME)
	ln -sf $(SONAME) $@

# The static library exports only the API, as the shared one does: the
# hidden symbols of the relocatable object (everything not SK_API:
# cpu_init, page_alloc, ...) are made local, so a program may define a
# function of any such name and still link it.  The tests, benchmarks and
# tools call layer-internal functions: they link libslabkit_internal.a,
# the objects as they are (a unit test gets only the layers it uses; the
# leak tests, which need own_begin's markers in place, link libslabkit.a).
$(B)/libslabkit.a: $(B)/obj/slabkit-all.o
	@rm -f $@
	objcopy --localize-hidden $< $(B)/obj/slabkit.o
	ar rcs $@ $(B)/obj/slabkit.o

$(B)/libslabkit_internal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

# The directories relative to ${prefix} where they lie under it (as
# pkg-config files are written, so `pkg-config --define-variable=prefix=`
# relocates them).
PC_SED := sed -e 's|@PREFIX@|$(PREFIX)|g' \
              -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|g' \
              -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|g' -e 's|@VERSION@|$(VERSION)|g'
$(B)/slabkit.pc: tools/slabkit.pc.in
	@mkdir -p $(B)
	$(PC_SED) $< > $@

$(B)/slabkit: tools/slabkit.sh
	@mkdir -p $(B)
	cp $< $@ && chmod +x $@

$(B)/tools/slabkit-symbolize: tools/slabkit-symbolize
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@

# Unit tests link the static library: they may call layer-internal functions.
# The KFENCE and slub_debug tests export their symbols, so that their
# reports name their functions.
$(B)/tests/malloc/kfence: TEST_LDFLAGS := -rdynamic
$(B)/tests/malloc/slub_debug: TEST_LDFLAGS := -rdynamic
TEST_LIB := $(B)/libslabkit_internal.a
$(B)/tests/malloc/leak_check $(B)/tests/malloc/leak_every: TEST_LIB := $(B)/libslabkit.a
$(B)/tests/%: tests/%.c $(wildcard tests/*.h tests/*/*.h) $(B)/libslabkit_internal.a $(B)/libslabkit.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Itests -o $@ $< $(TEST_LIB) -lm -Wl,--sort-section=name $(TEST_LDFLAGS)

# tests/shmem/locked_ops counts the shmem layer's locked page-flag updates:
# it links that layer compiled again with the counting hook (shmem.h),
# ahead of the library, whose own shmem objects it then leaves out.
SHMEM_COUNT_OBJ := $(patsubst %.c,$(B)/count/obj/%.o,$(wildcard src/shmem/*.c))
$(B)/count/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -DSK_SHMEM_COUNT_LOCKED=1 -c $< -o $@
$(B)/tests/shmem/locked_ops: tests/shmem/locked_ops.c $(SHMEM_COUNT_OBJ) $(wildcard tests/*.h tests/*/*.h) \
                             $(B)/libslabkit_internal.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Itests -o $@ $< $(SHMEM_COUNT_OBJ) $(TEST_LIB) -lm $(TEST_LDFLAGS)

$(B)/tests/%: tests/%.cc $(B)/libslabkit.so
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -fsized-deallocation -O2 -g -Wall -Wextra -Werror -pthread -Iinclude -o $@ $<

$(B)/bench/%: bench/%.c bench/bench.h $(B)/libslabkit_internal.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Ibench -o $@ $< $(B)/libslabkit_internal.a -lm

$(B)/bench/workloads/%: bench/workloads/%.c bench/bench.h $(wildcard bench/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -pthread -Ibench -o $@ $< -lm

$(B)/tools/obj/%.o: tools/%.c $(TOOL_HDR) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Itools -c $< -o $@

# -rdynamic: slabinfo's alloc_calls (debug=U) name the tool's own functions.
$(B)/tools/%: tools/%.c $(TOOL_LIB_OBJ) $(TOOL_HDR) $(B)/libslabkit_internal.a
	@mkdir -p $(dir $@)
	$(CC) $(PROGCFLAGS) -Itools $(LDFLAGS) -rdynamic -o $@ $< $(TOOL_LIB_OBJ) $(B)/libslabkit_internal.a

$(B)/tsan/obj/%.o: %.c $(B)/tsan/obj/%.d
	@mkdir -p $(dir $@)
	$(CC) $(TSANFLAGS) $(DEPFLAGS) -c $< -o $@

$(B)/tsan/tests/%: tests/%.c $(wildcard tests/*.h tests/*/*.h) $(TSAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TSANFLAGS) -Itests -o $@ $< $(TSAN_LIB_OBJ) -lm

$(B)/asan/obj/%.o: %.c $(B)/asan/obj/%.d
	@mkdir -p $(dir $@)
	$(CC) $(ASANFLAGS) $(DEPFLAGS) -c $< -o $@

$(B)/asan/tests/%: tests/%.c $(wildcard tests/*.h tests/*/*.h) $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ASANFLAGS) -Itests -o $@ $< $(ASAN_LIB_OBJ) -lm

test: all $(TSAN_BIN) $(ASAN_BIN) $(B)/asan/libslabkit.a
	@tests/run

# The kernel's radix-tree test harness (Debian's linux-source-6.1: xarray,
# maple tree, IDR, radix tree) on slabkit, every suite in every mode
# (tests/kernel/harness/run; docs/kernel.md).  make test runs a subset.
kernel-tests: lib tools $(B)/asan/libslabkit.a
	@tests/kernel/harness/run

# The quick tier: every layer's unit and stress tests (docs/testing.md).
check: lib $(TEST_BIN) $(TEST_CXXBIN)
	@tests/run check

test-tsan: $(TSAN_BIN)
	@tests/run tsan

# For programs of one's own: cc -fsanitize=address app.c build/asan/libslabkit.a
$(B)/asan/libslabkit.a: $(ASAN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(ASAN_LIB_OBJ)

asan: $(B)/asan/libslabkit.a $(ASAN_BIN)

test-asan: $(ASAN_BIN)
	@tests/run asan

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

# What `make install` puts where (uninstall removes exactly these).
INST_LIB := $(LIBDIR)/libslabkit.so.$(VERSION) $(LIBDIR)/$(SONAME) $(LIBDIR)/libslabkit.so $(LIBDIR)/libslabkit.a
INST_DEV := $(INCLUDEDIR)/slabkit.h $(PKGCONFIGDIR)/slabkit.pc $(INCLUDEDIR)/slabkit/kernel.h \
            $(INCLUDEDIR)/slabkit/linux/slab.h $(INCLUDEDIR)/slabkit/linux/gfp.h
INST_BIN := $(BINDIR)/slabkit $(BINDIR)/slabkit-slabinfo $(BINDIR)/slabkit-slabtop $(BINDIR)/slabkit-symbolize
INST_MAN := $(MANDIR)/man1/slabkit.1 $(MANDIR)/man1/slabkit-slabinfo.1 $(MANDIR)/man1/slabkit-slabtop.1 \
            $(MANDIR)/man1/slabkit-symbolize.1 \
            $(MANDIR)/man3/slabkit.3 $(MANDIR)/man7/slabkit.7

install: lib tools
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 644 $(B)/libslabkit.so.$(VERSION) $(B)/libslabkit.a $(DESTDIR)$(LIBDIR)/
	ln -sf libslabkit.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libslabkit.so
	install -m 644 include/slabkit.h $(DESTDIR)$(INCLUDEDIR)/
	install -d $(DESTDIR)$(INCLUDEDIR)/slabkit/linux
	install -m 644 include/slabkit/kernel.h $(DESTDIR)$(INCLUDEDIR)/slabkit/
	install -m 644 include/slabkit/linux/slab.h include/slabkit/linux/gfp.h $(DESTDIR)$(INCLUDEDIR)/slabkit/linux/
	$(PC_SED) tools/slabkit.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/slabkit.pc
	sed 's|^LIB=.*|LIB=$(LIBDIR)/$(SONAME)|' tools/slabkit.sh > $(DESTDIR)$(BINDIR)/slabkit
	chmod 755 $(DESTDIR)$(BINDIR)/slabkit
	install -m 755 $(B)/tools/slabinfo $(DESTDIR)$(BINDIR)/slabkit-slabinfo
	install -m 755 $(B)/tools/slabtop $(DESTDIR)$(BINDIR)/slabkit-slabtop
	install -m 755 tools/slabkit-symbolize $(DESTDIR)$(BINDIR)/slabkit-symbolize
	install -m 644 man/slabkit.1 man/slabkit-slabinfo.1 man/slabkit-slabtop.1 man/slabkit-symbolize.1 \
	    $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/slabkit.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 man/slabkit.7 $(DESTDIR)$(MANDIR)/man7/

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INST_LIB) $(INST_DEV) $(INST_BIN) $(INST_MAN))

# The Debian packages, built from a copy of this tree in $(B)/deb (where
# dpkg-buildpackage leaves the .deb files), then checked by lintian.  The
# copy's build must not inherit this make's variables (B= would have its
# `make clean` remove the copy itself).
deb:
	rm -rf $(B)/deb && mkdir -p $(B)/deb/slabkit-$(VERSION)
	tar --exclude=./build --exclude=./results --exclude=./.git -cf - . | tar -xf - -C $(B)/deb/slabkit-$(VERSION)
	cd $(B)/deb/slabkit-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES -u MAKELEVEL \
	    dpkg-buildpackage -us -uc -b
	lintian --fail-on error $(B)/deb/*.changes

clean:
	rm -rf $(B)

# The header dependencies -MMD wrote (none before the first build).
# Named explicitly, not by a pattern: a missing one is then not an
# intermediate file (.SECONDARY above) and forces its object's rebuild.
DEPFILES := $(LIB_OBJ:.o=.d) $(TSAN_LIB_OBJ:.o=.d) $(ASAN_LIB_OBJ:.o=.d)
$(DEPFILES):
-include $(wildcard $(DEPFILES))
