/*
 * cache_thrash — active false sharing, in the spirit of Hoard's cache-thrash:
 * every thread repeatedly allocates a small object, writes it many times and
 * frees it.  An allocator that hands two threads objects on the same cache
 * line at the same time makes every write a coherence miss, and the run
 * takes many times longer; one that keeps each thread's (or CPU's) small
 * objects apart runs at the speed of the write loop.
 *
 *     cache_thrash [-t threads] [-i iterations] [-r writes] [-s object-size]
 *
 * The loop, the checks and the census are false_sharing.h's.
 */
#include "false_sharing.h"

int main(int argc, char **argv)
{
    return false_sharing_main(argc, argv, "cache_thrash", false);
}
