/* feasibility.h — the feasibility stage (engine/feasibility.c), called by the plan stage only.
 *
 * In: a mesh and a plan whose shards are laid out. Out: the plan's per-device accounting and its
 * gather target. Must not: allocate device memory or change the shards.
 */
#ifndef QM_FEASIBILITY_H
#define QM_FEASIBILITY_H

#include "plan.h"

/* Per device: planned shard bytes + staging + scratch against usable capacity (and the host's
 * memory for the simulator). Fills p->devices; E-CAPACITY naming the first device that is over,
 * the bytes needed and usable (plan.c adds the frontier hint). */
qm_code qm_feasibility_check(const qm_mesh *mesh, qm_plan *p, qm_status *st);

/* The gather target (the best-connected device, or the host) and whether the whole state fits
 * there beside the shard it already holds; fills p->gather. */
qm_code qm_gather_plan(const qm_mesh *mesh, qm_plan *p, qm_status *st);

#endif
