/* plan_iqp.c — what the IQP encoding with ZZ terms (iqp; iqp-z is a product state) asks of a
 * plan: the layout its distributed Walsh-Hadamard transform can use, the exchange scratch, and
 * the exchanges' cost.
 *
 * In: a laid-out plan (plan.c calls qm_plan_iqp_layout after every policy's layout; feasibility.c
 * adds qm_plan_iqp_scratch_bytes to each device; cost.c qm_plan_iqp_cost to the encode phase).
 * Out: the plan refused with E-POLICY (plan.c's hint then names a policy that works), a byte
 * count, or seconds.
 * Rule (docs/planner.md, "IQP"): a state cut over devices needs equal power-of-two shards aligned
 * to their size (the policies equal and single give that; weighted and balanced only when their
 * deal happens to be equal); every device holding part of such a state needs exchange scratch:
 * one more shard, at most QM_IQP_SCRATCH_MAX_BYTES (1 GiB; a larger shard exchanges in pieces of
 * that). Batches deal whole states: no rule, no scratch, no exchange.
 * Must not: change the shards or allocate device memory.
 */
#include "feasibility.h"
#include "status_internal.h"

#include <stdio.h>
#include <stdlib.h>

static bool is_iqp(const qm_plan *p)
{
    return p->request.encoding == QM_ENCODING_IQP; /* iqp-z is a product state: one write */
}

/* Whether the plan cuts one IQP state over several shards (the transform then exchanges). */
static bool cuts_state(const qm_plan *p)
{
    return is_iqp(p) && p->request.batch <= 1 && p->policy != QM_POLICY_REPLICATED &&
           p->n_shards > 1;
}

/* The first shard that is not of shard 0's power-of-two length aligned to it, or -1. */
static int first_uneven(const qm_plan *p)
{
    const uint64_t S = p->shards[0].end - p->shards[0].start;
    for (int i = 0; i < p->n_shards; ++i) {
        const uint64_t len = p->shards[i].end - p->shards[i].start;
        if (len != S || (len & (len - 1)) || p->shards[i].start % len)
            return i;
    }
    return -1;
}

qm_code qm_plan_iqp_layout(qm_plan *p, qm_status *st)
{
    const int i = cuts_state(p) ? first_uneven(p) : -1;
    if (i < 0)
        return QM_OK;
    char what[64];
    if (i == 0)
        snprintf(what, sizeof what, "not a power of two");
    else
        snprintf(what, sizeof what, "shard 0 has %llu",
                 (unsigned long long)(p->shards[0].end - p->shards[0].start));
    p->feasible = false;
    p->error.code = QM_E_POLICY;
    snprintf(p->error.msg, sizeof p->error.msg,
             "plan: %s: the %s transform needs equal power-of-two shards, but shard %d is [%llu, "
             "%llu) (%llu amplitudes, %s)",
             qm_policy_name(p->policy), qm_encoding_name(p->request.encoding), i,
             (unsigned long long)p->shards[i].start, (unsigned long long)p->shards[i].end,
             (unsigned long long)(p->shards[i].end - p->shards[i].start), what);
    if (st)
        *st = p->error;
    return QM_E_POLICY;
}

uint64_t qm_iqp_scratch_bytes(uint64_t shard_bytes)
{
    return shard_bytes < QM_IQP_SCRATCH_MAX_BYTES ? shard_bytes : QM_IQP_SCRATCH_MAX_BYTES;
}

uint64_t qm_plan_iqp_scratch_bytes(const qm_plan *p, int device)
{
    if (!cuts_state(p))
        return 0;
    for (int i = 0; i < p->n_shards; ++i)
        if (p->shards[i].device == device) /* one shard per device under equal and single */
            return qm_iqp_scratch_bytes(p->shards[i].bytes);
    return 0;
}

unsigned qm_plan_iqp_exchanges(const qm_plan *p)
{
    /* an uneven layout (refused, but still shown and costed by plan.c) has no exchanges */
    if (!cuts_state(p) || first_uneven(p) >= 0)
        return 0;
    unsigned s = 0;
    for (uint64_t k = (uint64_t)p->n_shards; k > 1; k >>= 1)
        ++s;
    return s;
}
