/*
 * cache_scratch — passive false sharing, in the spirit of Hoard's
 * cache-scratch: the main thread allocates one small object per worker, all
 * in a row (so they likely share cache lines), and hands one to each.  Each
 * worker frees its object at once and then repeatedly allocates, writes
 * many times and frees an object of the same size.  An allocator that gives
 * the freed object straight back to the worker (a per-thread or per-CPU
 * free list that is LIFO over remote frees) keeps the workers writing to
 * one cache line; one that sends the object home to its owner does not.
 *
 *     cache_scratch [-t threads] [-i iterations] [-r writes] [-s object-size]
 *
 * The loop, the checks and the census are false_sharing.h's.
 */
#include "false_sharing.h"

int main(int argc, char **argv)
{
    return false_sharing_main(argc, argv, "cache_scratch", true);
}
