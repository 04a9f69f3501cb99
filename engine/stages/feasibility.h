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

/* Host memory (docs/planner.md "Host memory"), after qm_feasibility_check passed, for a mesh whose
 * host_budget.sim is set (a no-op returning QM_OK otherwise): per scenario host, its devices'
 * planned bytes + host staging (as much again) + the read-back chunk (rank 0's host) against the
 * host's `memory` when given; their sum against host_budget.available_bytes when set. Fills
 * p->hosts and p->local_planned_bytes; E-CAPACITY naming the host and the bytes (plan.c adds the
 * frontier hint). Cannot fail otherwise. */
qm_code qm_feasibility_host_check(const qm_mesh *mesh, qm_plan *p, qm_status *st);

/* The gather target (the best-connected device, or the host) and whether the whole state fits
 * there beside the shard it already holds; fills p->gather. */
qm_code qm_gather_plan(const qm_mesh *mesh, qm_plan *p, qm_status *st);

/* The IQP encodings (plan_iqp.c; docs/planner.md, "IQP"). For a plan that cuts one iqp
 * state over several shards: E-POLICY when its shards make more than 4096 pages (the largest
 * power of two dividing every boundary; plan's error set, the message naming the shard; plan.c
 * adds the hint; QM_OK for anything else); the exchange scratch a device needs (per page it
 * holds, qm_iqp_scratch_bytes of a page; 0 when nothing is cut); the number of exchange stages
 * (log2 of the page count; 0 when nothing is cut). Cannot fail but for the layout check. */
qm_code qm_plan_iqp_layout(qm_plan *p, qm_status *st);
/* The exchange scratch of a device holding a shard of `shard_bytes`: the whole shard up to
 * QM_IQP_SCRATCH_MAX_BYTES, else that much (the exchange then runs each stage in pieces of it:
 * iqp.c). One rule for the planner and the encode. */
#define QM_IQP_SCRATCH_MAX_BYTES ((uint64_t)1 << 30)
uint64_t qm_iqp_scratch_bytes(uint64_t shard_bytes);
/* A cut state's pages: at most 2^QM_IQP_MAX_PAGE_LOG2 (4096) of them (plan: E-POLICY; encode:
 * E-SHARDS); the stages below the page run in each shard, the others exchange pages. */
#define QM_IQP_MAX_PAGE_LOG2 12u
/* The alignment of a shard boundary x of a 2^qubits state: the number of trailing zero bits of
 * x, qubits for 0 and for 2^qubits (or more). */
static inline unsigned qm_iqp_align_bits(uint64_t x, unsigned qubits)
{
    if (x == 0 || (qubits < 64 && x >= ((uint64_t)1 << qubits)))
        return qubits;
    const unsigned t = (unsigned)__builtin_ctzll(x);
    return t < qubits ? t : qubits;
}
/* The page bits L of a plan (its stages below 2^L run in each shard): qubits when no state is
 * cut. */
unsigned qm_plan_iqp_local_bits(const qm_plan *p);
uint64_t qm_plan_iqp_scratch_bytes(const qm_plan *p, int device);
unsigned qm_plan_iqp_exchanges(const qm_plan *p);

#endif
