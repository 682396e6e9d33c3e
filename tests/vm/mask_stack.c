/*
 * mask_stack — seed 002's before really runs: with slice_mask_cache=0 a
 * slice request computes its masks on its own stack, as the powerpc slice
 * code did before the series (656-byte frame, 320 after).
 *
 * A thread on a stack of ours, painted with a pattern, maps and unmaps one
 * slice (sk_vm_map, which claims it from the arena); the depth of the
 * stack it used is where the pattern ends.  Measured with the masks cached
 * (the default) and with slice_mask_cache=0, each after a warm-up that
 * made the arena's region: the before must go at least 256 bytes deeper
 * (its frame holds a 384-byte struct vm_masks), and both mappings must
 * work.  It fails if the switch is ignored.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "slabkit.h"
#include "os/os.h"

#define STACK (256u << 10)
#define PAINT 0xa5

static unsigned char stack_mem[STACK] __attribute__((aligned(4096)));
static int mapped_ok;

static void *one_slice(void *arg)
{
    (void)arg;
    size_t size = 4u << 20;
    void *p = sk_vm_map(size, 4096);
    if (p) {
        memset(p, 1, 64);
        mapped_ok += sk_vm_unmap(p, size) == 0;
    }
    return NULL;
}

/* Stack bytes a run of one_slice used on a painted stack. */
static size_t depth_of_run(void)
{
    memset(stack_mem, PAINT, sizeof stack_mem);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, stack_mem, sizeof stack_mem);
    pthread_t t;
    if (pthread_create(&t, &a, one_slice, NULL) != 0)
        BAIL("pthread_create on our stack failed");
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
    size_t low = 0;
    while (low < sizeof stack_mem && stack_mem[low] == PAINT)
        low++;
    return sizeof stack_mem - low;
}

int main(void)
{
    plan(3);
    os_options_init();
    pthread_t t;
    pthread_create(&t, NULL, one_slice, NULL);   /* the arena's first region */
    pthread_join(t, NULL);

    sk_opt.slice_mask_cache = 1;
    size_t after = depth_of_run();
    sk_opt.slice_mask_cache = 0;
    size_t before = depth_of_run();
    sk_opt.slice_mask_cache = 1;
    size_t after2 = depth_of_run();
    if (after2 < after)
        after = after2;
    diag("stack used by a slice request: %zu bytes with the masks cached, %zu with slice_mask_cache=0 "
         "(the seed: 320 and 656 in slice_get_unmapped_area's frame)", after, before);
    is(mapped_ok, 4, "every slice was mapped and unmapped");
    ok(before >= after + 256, "slice_mask_cache=0 computes its masks on the stack: %zu bytes deeper",
       before - after);
    ok(after < before, "the cached masks need no mask on the stack");
    return done_testing();
}
