/*
 * options — the SLABKIT_OPTIONS parser accepts good input and survives bad
 * input: an unknown key or a bad value (non-numeric, out of range, empty,
 * overflowing, '=' alone, stray commas, a string longer than the parser's
 * buffer) prints one warning line naming it, is counted, and leaves every
 * option as it was; nothing crashes.  Values may be words where an option
 * has them (mutex_spin=mcs); any other word is a bad value.  The warnings are captured from
 * stderr and checked line by line.  A retired key's warning names its
 * replacement; an option the mode ignores is applied and warned about;
 * `help` lists every option of the table with its value now.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/os.h"
#include "tap.h"

static char captured[8192];

/* Parse `text` with stderr redirected to a temporary file; the warning
 * lines end up in `captured`; returns the parser's warning count. */
static int parse_capture(const char *text)
{
    FILE *tmp = tmpfile();
    if (!tmp)
        BAIL("tmpfile: cannot capture stderr");
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    int w = os_options_parse(text);
    dup2(saved, 2);
    close(saved);
    size_t n = (size_t)lseek(fileno(tmp), 0, SEEK_END);
    if (n >= sizeof captured)
        n = sizeof captured - 1;
    ssize_t r = pread(fileno(tmp), captured, n, 0);
    captured[r > 0 ? r : 0] = 0;
    fclose(tmp);
    return w;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A bad input: `want` warnings, as many lines on stderr, each starting
 * with "slabkit: ", the first naming `names` (may be NULL), and every
 * option unchanged. */
static void bad(const char *text, int want, const char *names, const char *what)
{
    struct sk_options before = sk_opt;
    int w = parse_capture(text);
    is(w, want, "%s: %d warning(s) counted", what, want);
    int lines_ok = count_lines(captured) == want;
    for (const char *l = captured; *l;) {
        const char *nl = strchr(l, '\n');
        if (strncmp(l, "slabkit: ", 9) != 0 || !nl) {
            lines_ok = 0;
            break;
        }
        l = nl + 1;
    }
    if (names && !strstr(captured, names))
        lines_ok = 0;
    if (!ok(lines_ok, "%s: one warning line each on stderr%s%s", what, names ? " naming " : "",
            names ? names : ""))
        diag("stderr was: %s", captured);
    ok(!memcmp(&before, &sk_opt, sizeof before), "%s: options unchanged", what);
    sk_opt = before;
}

int main(void)
{
    /* The environment is read once, over the defaults; a bad item in it
     * is skipped without losing the good ones. */
    setenv("SLABKIT_OPTIONS", "decay_ms=123,no_such_key=1,pcp=7", 1);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    os_options_init();
    os_options_init();                 /* idempotent */
    dup2(saved, 2);
    close(saved);
    close(null);
    unsetenv("SLABKIT_OPTIONS");
    is(sk_opt.decay_ms, 123, "environment: good value applied by os_options_init");
    is(sk_opt.pcp, 1, "environment: bad value left the default");
    is(sk_option("decay_ms"), 123, "sk_option reads the parsed value");
    is(sk_option("no_such_key"), -1, "sk_option: unknown key is -1");
    is(sk_option(""), -1, "sk_option: empty key is -1");

    const struct sk_options defaults = sk_opt;

    /* ---- good input ---- */
    is(parse_capture(NULL), 0, "NULL: no warning");
    is(parse_capture(""), 0, "empty string: no warning");
    is(parse_capture("pcp=0,decay_ms=250,cpu_partial=-1"), 0, "three good keys: no warning");
    ok(sk_opt.pcp == 0 && sk_opt.decay_ms == 250 && sk_opt.cpu_partial == -1, "three good keys applied");
    ok(captured[0] == 0, "good input writes nothing to stderr");
    sk_opt = defaults;
    is(parse_capture("decay_ms=0x40"), 0, "hex value accepted");
    is(sk_opt.decay_ms, 64, "hex value 0x40 is 64");
    sk_opt = defaults;
    is(sk_opt.allocator, SK_ALLOC_SLUB, "allocator defaults to slub");
    is(parse_capture("allocator=slab,slab_mgmt=onslab"), 0, "word values accepted");
    ok(sk_opt.allocator == SK_ALLOC_SLAB && sk_opt.slab_mgmt == SK_SLAB_MGMT_ONSLAB,
       "allocator=slab,slab_mgmt=onslab applied");
    is(parse_capture("allocator=slub,slab_mgmt=page"), 0, "the other words accepted");
    ok(sk_opt.allocator == SK_ALLOC_SLUB && sk_opt.slab_mgmt == SK_SLAB_MGMT_PAGE,
       "allocator=slub,slab_mgmt=page applied");
    sk_opt = defaults;
    is(sk_opt.leak_check, 0, "leak_check defaults to 0");
    is(parse_capture("leak_check"), 0, "leak_check (bare) accepted");
    is(sk_opt.leak_check, 1, "leak_check on");
    ok(parse_capture("leak_check=2") == 1 && sk_opt.leak_check == 1, "leak_check=2: one warning, value kept");
    sk_opt = defaults;
    is(parse_capture("verbose"), 0, "bare key accepted");
    is(sk_opt.verbose, 1, "bare key means key=1");
    sk_opt = defaults;
    is(parse_capture(",,pcp=0,,,mutex_spin=0,,"), 0, "stray commas around good items: no warning");
    ok(sk_opt.pcp == 0 && sk_opt.mutex_spin == 0, "stray commas: both items applied");
    sk_opt = defaults;
    is(parse_capture("pcp=0,  mutex_spin=0"), 0, "spaces after a comma are skipped");
    ok(sk_opt.pcp == 0 && sk_opt.mutex_spin == 0, "spaces after a comma: both applied");
    sk_opt = defaults;
    is(parse_capture("decay_ms=0,decay_ms=3600000"), 0, "range ends accepted");
    is(sk_opt.decay_ms, 3600000, "the last of a repeated key wins");
    sk_opt = defaults;
    is(parse_capture("mutex_spin=mcs"), 0, "mutex_spin=mcs: a word value accepted, no warning");
    is(sk_opt.mutex_spin, MUTEX_SPIN_MCS, "mutex_spin=mcs selects the pre-2014 queue");
    ok(captured[0] == 0, "mutex_spin=mcs writes nothing to stderr");
    is(parse_capture("mutex_spin=1"), 0, "mutex_spin=1 after mcs: numbers still accepted");
    is(sk_opt.mutex_spin, MUTEX_SPIN_ON, "mutex_spin=1 is the default mode again");
    is(parse_capture("pcp=0,mutex_spin=mcs,decay_ms=7"), 0, "a word value between numbers: no warning");
    ok(sk_opt.pcp == 0 && sk_opt.mutex_spin == MUTEX_SPIN_MCS && sk_opt.decay_ms == 7,
       "a word value between numbers: all three applied");
    sk_opt = defaults;
    is(parse_capture(",,,, , ,"), 0, "only commas and spaces: no warning");
    ok(!memcmp(&defaults, &sk_opt, sizeof defaults), "only commas and spaces: options unchanged");

    /* ---- bad input: counted, named, ignored ---- */
    bad("no_such_key=1", 1, "'no_such_key'", "unknown key");
    bad("PCP=0", 1, "'PCP'", "keys are case-sensitive");
    bad("pcp =0", 1, "'pcp '", "space before '=' makes an unknown key");
    bad("decay_ms=abc", 1, "'abc'", "non-numeric value");
    bad("decay_ms=12abc", 1, "'12abc'", "trailing garbage after a number");
    bad("decay_ms=1.5", 1, "'1.5'", "fraction");
    bad("pcp=2", 1, "for pcp", "above the range");
    bad("pcp=-1", 1, "for pcp", "below the range");
    bad("dirty_max_mb=2000000", 1, "dirty_max_mb", "dirty_max_mb past its range");
    bad("allocator=1", 1, "for allocator (want slub or slab)", "a word option refuses a number");
    bad("allocator=SLAB", 1, "'SLAB'", "words are case-sensitive");
    bad("slab_mgmt=", 1, "for slab_mgmt", "empty word");
    bad("allocator", 1, "for allocator", "a bare word key (means =1) is refused");
    bad("slab_reserved=64", 1, "'slab_reserved' is retired: use allocator=slab,slab_mgmt=onslab",
        "slab_reserved is retired, and its warning names the replacement");
    bad("decay_ms=99999999999999999999999", 1, "decay_ms", "overflowing number");
    bad("decay_ms=-99999999999999999999999", 1, "decay_ms", "underflowing number");
    bad("pcp=", 1, "for pcp", "empty value");
    bad("pcp==0", 1, "'=0'", "'==' makes the value start with '='");
    bad("=", 1, "''", "'=' alone");
    bad("=5", 1, "''", "'=5' (no key)");
    bad(",=,", 1, "''", "'=' between commas");
    bad("pcp=0x", 1, "'0x'", "'0x' without digits");
    bad("\x01\x7f\xff=1", 1, NULL, "control and high bytes in the key");
    bad("bogus=1,decay_ms=x", 2, "'bogus'", "two bad items in one list");
    bad("mutex_spin=bogus", 1, "'bogus' for mutex_spin (want 0..1 or mcs)", "mutex_spin=bogus: a word it lacks");
    is(sk_opt.mutex_spin, MUTEX_SPIN_ON, "mutex_spin=bogus keeps the default (1)");
    bad("mutex_spin=MCS", 1, "'MCS'", "words are case-sensitive");
    bad("mutex_spin=mcs2", 1, "'mcs2'", "a word with trailing garbage");
    bad("mutex_spin=2", 1, "for mutex_spin", "mutex_spin=2: the word's value is not a number it takes");
    bad("pcp=mcs", 1, "'mcs' for pcp (want 0..1)", "another option's word");
    {
        struct sk_options before = sk_opt;
        int w = parse_capture("pcp=0,bogus=1,decay_ms=x,mutex_spin=0");
        is(w, 2, "mixed list: two warnings");
        ok(sk_opt.pcp == 0 && sk_opt.mutex_spin == 0 && sk_opt.decay_ms == before.decay_ms,
           "mixed list: good items applied, the bad value ignored");
        sk_opt = before;
    }

    /* ---- length: the parser copies into a 1024-byte stack buffer ---- */
    static char longs[64 * 1024];
    memset(longs, 'a', sizeof longs - 1);
    bad(longs, 1, "longer than", "64 KiB of one key");
    char key500[600];
    memset(key500, 'k', 500);
    strcpy(key500 + 500, "=1");
    bad(key500, 1, "kkkk", "500-byte unknown key");
    char val500[600] = "decay_ms=";
    memset(val500 + 9, '9', 500);
    val500[509] = 0;
    bad(val500, 1, "bad value", "500-digit value");
    /* 1023 bytes fit (with the NUL): commas, then a good item at the end. */
    memset(longs, ',', 1023);
    memcpy(longs + 1023 - 5, "pcp=0", 5);
    longs[1023] = 0;
    is(parse_capture(longs), 0, "1023 bytes: parsed, no warning");
    is(sk_opt.pcp, 0, "1023 bytes: the item at the very end applied");
    sk_opt = defaults;
    longs[1023] = ',';
    longs[1024] = 0;
    bad(longs, 1, "longer than", "1024 bytes: refused as a whole");

    /* Paths: slabinfo_file and swap_file take any text up to 255 bytes,
     * commas excepted (they separate items); longer is refused whole. */
    is(parse_capture("slabinfo_file=/tmp/r.%p,pcp=0"), 0, "slabinfo_file=PATH: no warning");
    ok(!strcmp(sk_opt.slabinfo_file, "/tmp/r.%p") && sk_opt.pcp == 0, "slabinfo_file kept verbatim (%%p expands at load)");
    sk_opt = defaults;
    char longpath[300] = "slabinfo_file=";
    memset(longpath + 14, 'a', 260);
    longpath[274] = 0;
    bad(longpath, 1, "slabinfo_file value of 260 bytes too long", "slabinfo_file of 260 bytes");

    /* Many items: every bad one warns once, none is lost or doubled. */
    char many[1000] = "";
    for (int i = 0; i < 40; i++)
        strcat(many, i % 2 ? "x=1," : "pcp=9,");
    bad(many, 40, NULL, "40 bad items");

    ok(!memcmp(&defaults, &sk_opt, sizeof defaults), "after all bad input: options as before");

    /* ---- an option the mode ignores: applied, and warned about once the
     * whole list is read (so the mode may come after it) ---- */
    is(parse_capture("slab_mgmt=onslab"), 1, "slab_mgmt without allocator=slab: one warning");
    ok(strstr(captured, "slab_mgmt does nothing without allocator=slab") != NULL, "  naming what it needs: %s", captured);
    is(sk_opt.slab_mgmt, SK_SLAB_MGMT_ONSLAB, "  and still applied");
    sk_opt = defaults;
    is(parse_capture("slab_mgmt=onslab,allocator=slab"), 0, "slab_mgmt before allocator=slab: no warning");
    sk_opt = defaults;
    /* mem_limit_mb=0: the default would take the cgroup's limit where there
     * is one, and swap_file then serves the budget. */
    is(parse_capture("kfence_pages=10,debug_caches=kmalloc-64,debug_continue,swap_file=/tmp/s,mem_limit_mb=0"), 4,
       "kfence_pages, debug_caches, debug_continue, swap_file alone: four warnings");
    sk_opt = defaults;
    is(parse_capture("kfence=100,kfence_pages=10,debug=FZ,debug_caches=kmalloc-64,debug_continue"), 0,
       "the same with kfence and debug on: none");
    sk_opt = defaults;
    is(parse_capture("sheaves=0,array_size=8"), 1, "array_size with sheaves=0: one warning");
    sk_opt = defaults;
    /* Each seed's before switch, where the mode set beside it ignores it. */
    is(parse_capture("allocator=slab,cpu_partial=0"), 1, "cpu_partial under allocator=slab: one warning");
    ok(strstr(captured, "cpu_partial does nothing without allocator=slub") != NULL, "  naming what it needs");
    sk_opt = defaults;
    is(parse_capture("allocator=slab,sheaves=0"), 1, "sheaves under allocator=slab: one warning");
    sk_opt = defaults;
    is(parse_capture("mutex_spin=mcs,mutex_handoff=0,mutex_wake_spin=0"), 2,
       "mutex_handoff and mutex_wake_spin under mutex_spin=mcs: two warnings");
    ok(strstr(captured, "mutex_handoff does nothing without mutex_spin=1") != NULL, "  naming what it needs");
    sk_opt = defaults;
    is(parse_capture("mutex_handoff=0,mutex_wake_spin=0"), 0, "the same in the default: none");
    ok(sk_opt.mutex_handoff == 0 && sk_opt.mutex_wake_spin == 0, "  applied");
    sk_opt = defaults;
    is(parse_capture("leak_exitcode=23,debug_exitcode=7"), 0, "leak_exitcode and debug_exitcode accepted");
    ok(sk_opt.leak_exitcode == 23 && sk_opt.debug_exitcode == 7, "  applied");
    bad("leak_exitcode=256", 1, "for leak_exitcode (want 0..255)", "leak_exitcode past an exit status");
    sk_opt = defaults;

    /* ---- help: every option of the table, with its value now ---- */
    is(parse_capture("help,decay_ms=77"), 0, "help with another option: no warning");
    is(sk_opt.decay_ms, 77, "  the other option applied");
    struct sk_option_doc d;
    unsigned n = 0, listed = 0;
    for (; sk_option_doc(n, &d) == 0; n++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\n  %s ", d.key);
        listed += strstr(captured, pat) != NULL && d.help && d.help[0];
    }
    ok(n >= 30 && listed == n, "help lists all %u options of the table, each with its help (%u)", n, listed);
    ok(strstr(captured, "decay_ms          77        (default 500;") != NULL, "  decay_ms with its value now and default");
    ok(strstr(captured, "debug_caches") && strstr(captured, "slab_mgmt") && strstr(captured, "allocator=slab"),
       "  and what an option needs");
    sk_opt = defaults;
    bad("help=1", 1, "'help'", "help takes no value");
    return done_testing();
}
