/*
 * report.h — what the heap-bug reports share (KFENCE, slub_debug): call
 * stacks taken without allocating, frames named for a reader, written
 * without stdio.
 *
 * Stacks are return addresses from backtrace(), whose first call loads the
 * unwinder (libgcc_s, allocating): report_ready() makes that first call
 * once, and says no while it runs (a malloc made by the loader meanwhile
 * gets no stack).  A frame is named "name+0xoff" from the dynamic symbol
 * table (dladdr), else from the module file's full one (.symtab: static
 * functions, programs linked without -rdynamic), else "module+0xoff".
 * The line is printed with "(module+0xoff)" after the name, which
 * tools/slabkit-symbolize turns into file:line with addr2line.
 */
#ifndef SK_REPORT_H
#define SK_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "os/os.h"

#define REPORT_PRINT_FRAMES 16    /* frames printed per stack */

/* The unwinder is loaded and slabkit's own module known: stacks can be
 * taken.  The first call does the set-up (any thread; others get false
 * until it is done). */
bool report_ready(void);
/* Up to max return addresses of the caller's stack; 0 when not ready. */
int report_stack(void **frames, int max);
/* Frames of frames[0..n) to skip: slabkit's own, from the top; all of them
 * only if every frame is (then none are skipped). */
int report_skip_allocator(void *const *frames, int n);
/* "name+0xoff" where dladdr knows a name, else "module+0xoff"; a return
 * address (ret) is named one byte back, inside its call. */
void report_format_frame(char *buf, size_t size, void *addr, bool ret);
/* A return address as the kernel's %pS names a call site:
 * "name+0xoff/0xsize" (the symbol's size where the table has it). */
void report_format_site(char *buf, size_t size, void *addr);
/* One frame a line to stderr: " name+0xoff (module+0xoff)". */
void report_print_frame(void *addr, bool ret);
/* Up to REPORT_PRINT_FRAMES of them. */
void report_print_frames(void *const *frames, int n);
/* In a forked child: a set-up caught half-way in another thread starts
 * over. */
void report_atfork_child(void);

#endif
