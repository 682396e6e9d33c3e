/*
 * own_end.c — the end markers of slabkit's own writable data, linked last
 * (own_begin.c says why and how they are used).
 */
#include "os/os.h"

SK_INTERNAL char sk_own_data_end[8] __attribute__((section(".data"), aligned(8))) = { 1 };
SK_INTERNAL void *sk_own_rel_end __attribute__((section(".data.rel"), aligned(8))) = &sk_own_rel_end;
SK_INTERNAL void *sk_own_rel_local_end __attribute__((section(".data.rel.local"), aligned(8))) = &sk_own_rel_local_end;
SK_INTERNAL char sk_own_bss_end[8] __attribute__((section(".bss"), aligned(8)));
SK_INTERNAL char sk_own_big_end[8] __attribute__((section(".bss.sk_big"), aligned(8)));
