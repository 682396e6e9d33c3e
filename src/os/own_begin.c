/*
 * own_begin.c, own_end.c — markers around slabkit's own writable data.
 *
 * The library is linked with own_begin.o first and own_end.o last (the
 * Makefile's LIB_OBJ order, and the one relocatable object that both
 * libslabkit.a and libslabkit.so are made of), so each writable section
 * of slabkit's (.data, .data.rel, .data.rel.local, .bss, .bss.sk_big)
 * runs from the begin marker of that section to its end marker, whatever
 * program it is linked into.  The leak scan (src/debug/leak.c) reads the
 * program's data as roots but not these ranges: slabkit's own variables
 * hold heap addresses (a slice's base, the first object's address) that
 * would keep leaked objects looking referenced.  Nothing else reads them.
 * No lock, no invariant beyond the order of the link.
 */
#include "os/os.h"

SK_INTERNAL char sk_own_data_begin[8] __attribute__((section(".data"), aligned(8))) = { 1 };
SK_INTERNAL void *sk_own_rel_begin __attribute__((section(".data.rel"), aligned(8))) = &sk_own_rel_begin;
SK_INTERNAL void *sk_own_rel_local_begin __attribute__((section(".data.rel.local"), aligned(8))) = &sk_own_rel_local_begin;
SK_INTERNAL char sk_own_bss_begin[8] __attribute__((section(".bss"), aligned(8)));
SK_INTERNAL char sk_own_big_begin[8] __attribute__((section(".bss.sk_big"), aligned(8)));
