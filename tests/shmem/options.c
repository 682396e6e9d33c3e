/*
 * options — sk_file's options parse: page_microopt and shmem_limit_mb as
 * numbers in range, swap_file as a path (the one option whose value is not
 * a number), a path too long for it refused with one warning and the old
 * value kept; the layer reads page_microopt once, at its first file.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "os/os.h"
#include "page/page_internal.h"
#include "shmem/shmem.h"
#include "slabkit.h"
#include "tap.h"

static int parse_quiet(const char *text)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *null = fopen("/dev/null", "w");
    if (null)
        dup2(fileno(null), 2);
    int w = os_options_parse(text);
    dup2(saved, 2);
    close(saved);
    if (null)
        fclose(null);
    return w;
}

int main(void)
{
    is(sk_opt.page_microopt, 1, "page_microopt defaults to 1 (the series)");
    is(sk_opt.shmem_limit_mb, 0, "shmem_limit_mb defaults to 0 (no limit)");
    is(sk_opt.swap_file[0], 0, "swap_file defaults to none");
    is(parse_quiet("swap_file=/var/tmp/a,b.swap,shmem_limit_mb=64"), 1,
       "a comma ends the path (one warning for the stray 'b.swap')");
    ok(!strcmp(sk_opt.swap_file, "/var/tmp/a"), "swap_file holds the path (%s)", sk_opt.swap_file);
    is(sk_opt.shmem_limit_mb, 64, "shmem_limit_mb=64 parsed beside it");
    char longer[600] = "swap_file=/";
    memset(longer + 11, 'x', 400);
    is(parse_quiet(longer), 1, "a path longer than 255 bytes: one warning");
    ok(!strcmp(sk_opt.swap_file, "/var/tmp/a"), "and the old path kept");
    is(parse_quiet("page_microopt=2"), 1, "page_microopt=2 is out of range");
    is(parse_quiet("page_microopt=0,shmem_limit_mb=0"), 0, "page_microopt=0 accepted");
    sk_file_t *f = sk_file_create("opt");
    ok(f && page_before == (1u << PAGE_NR_PATCHES) - 1,
       "page_init reads page_microopt=0: every patch's before (%#x)", page_before);
    sk_file_destroy(f);
    /* page_before names patches (read at page_init; run again here). */
    is(parse_quiet("page_microopt=1,page_before=lru_add:accessed"), 0, "page_before=lru_add:accessed accepted");
    page_series_init();
    is(page_before, (1u << PATCH_LRU_ADD) | (1u << PATCH_ACCESSED), "those two patches' befores, no other");
    is(parse_quiet("page_before=prefetch_flags:bogus"), 0, "a name is checked at page_init, not at parse");
    fflush(stderr);
    int saved = dup(2), p[2];
    char msg[256] = "";
    if (pipe(p) == 0) {
        dup2(p[1], 2);
        page_series_init();
        dup2(saved, 2);
        close(p[1]);
        ssize_t n = read(p[0], msg, sizeof msg - 1);
        msg[n > 0 ? n : 0] = 0;
        close(p[0]);
    }
    close(saved);
    ok(page_before == 1u << PATCH_PREFETCH_FLAGS && strstr(msg, "no patch 'bogus'"),
       "an unknown name: a warning (%.*s), the rest kept", (int)strcspn(msg, "\n"), msg);
    return done_testing();
}
