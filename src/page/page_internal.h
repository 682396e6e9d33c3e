/*
 * page_internal.h — between page.c (the zones and per-CPU lists) and
 * purge.c (the background purger's policy); nothing outside src/page.
 */
#ifndef SK_PAGE_INTERNAL_H
#define SK_PAGE_INTERNAL_H

#include "page/page.h"

/* ---- zone hooks for the purger (page.c) ---- */

/* One purger pass over zone z: purge dirty blocks free for at least
 * decay_ms (and any beyond dirty_max_mb), taking the zone lock only with a
 * try-lock.  *seq gets the zone's dirty_seq as the pass left it.  Returns
 * whether the zone may still have work for a later pass: it was busy,
 * the pass stopped at its bound, or a free dirtied it within decay_ms. */
bool zone_purge(struct zone *z, uint64_t now, uint64_t decay_ms, unsigned long *seq);
/* Has z gained dirty blocks since the pass that saw `seq`?  Also true
 * when the zone is busy (the caller stays awake rather than wait). */
bool zone_dirtied_since(struct zone *z, unsigned long seq);
/* Drain into the zone every per-CPU page list that holds blocks and has
 * not been touched since the previous call (seen[] keeps each list's
 * operation count, (PCP_MAX_ORDER + 1) x cpu_nr_slots()).  Returns whether
 * any list still holds blocks. */
bool pcp_drain_idle(uint32_t *seen, unsigned long *drained);

/* ---- purger hooks for page.c (purge.c) ---- */

void purge_init(void);
/* The free path found page_purger.work 0 (under a zone lock, after it
 * gained dirty blocks) and has dropped the lock: wake the purger. */
void purge_kick(void);
void purge_atfork_child(void);

#endif
