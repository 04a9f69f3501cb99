/* plan_iqp.c — what the IQP encoding with ZZ terms (iqp; iqp-z is a product state) asks of a
 * plan: the layout its distributed Walsh-Hadamard transform can use, the exchange scratch, and
 * the exchanges' cost.
 *
 * In: a laid-out plan (plan.c calls qm_plan_iqp_layout after every policy's layout; feasibility.c
 * adds qm_plan_iqp_scratch_bytes to each device; cost.c qm_plan_iqp_cost to the encode phase).
 * Out: the plan refused with E-POLICY (plan.c's hint then names a policy that works), a byte
 * count, or seconds.
 * Rule (docs/planner.md, "IQP"): a state cut over devices is seen as pages, the largest power of
 * two that divides every shard boundary; the transform runs the stages below the page in each
 * shard and every higher stage as an exchange between pages, so it needs at most
 * 2^QM_IQP_MAX_PAGE_LOG2 pages (single, equal and weighted give whole pages, balanced only when
 * its deal is that of equal); every device holding part of such a state needs exchange scratch:
 * per page it holds, one page, at most QM_IQP_SCRATCH_MAX_BYTES (1 GiB; a larger page exchanges
 * in pieces of that). Batches deal whole states: no rule, no scratch, no exchange.
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

/* The page of a cut state: the largest power of two 2^L (L <= qubits) that divides every shard
 * boundary, so that every shard is a run of whole aligned pages; *worst: the shard with the
 * boundary that sets L (the first such). */
static unsigned page_bits(const qm_plan *p, int *worst)
{
    unsigned L = p->request.qubits;
    *worst = 0;
    for (int i = 0; i < p->n_shards; ++i) {
        const unsigned a = qm_iqp_align_bits(p->shards[i].start, p->request.qubits);
        const unsigned b = qm_iqp_align_bits(p->shards[i].end, p->request.qubits);
        const unsigned m = a < b ? a : b;
        if (m < L) {
            L = m;
            *worst = i;
        }
    }
    return L;
}

/* Whether the cut state's pages are few enough for the transform (at most 2^QM_IQP_MAX_PAGE_LOG2):
 * -1 when they are (or nothing is cut), else the shard that makes them too many. */
static int refused_shard(const qm_plan *p)
{
    if (!cuts_state(p))
        return -1;
    int worst;
    const unsigned L = page_bits(p, &worst);
    return p->request.qubits - L > QM_IQP_MAX_PAGE_LOG2 ? worst : -1;
}

unsigned qm_plan_iqp_local_bits(const qm_plan *p)
{
    int worst;
    return cuts_state(p) ? page_bits(p, &worst) : p->request.qubits;
}

qm_code qm_plan_iqp_layout(qm_plan *p, qm_status *st)
{
    const int i = refused_shard(p);
    if (i < 0)
        return QM_OK;
    const unsigned L = qm_plan_iqp_local_bits(p);
    p->feasible = false;
    p->error.code = QM_E_POLICY;
    snprintf(p->error.msg, sizeof p->error.msg,
             "plan: %s: the %s transform needs shards of whole aligned power-of-two pages, at most "
             "%u of them, but shard %d [%llu, %llu) makes pages of %llu amplitude%s (%llu "
             "pages)",
             qm_policy_name(p->policy), qm_encoding_name(p->request.encoding),
             1u << QM_IQP_MAX_PAGE_LOG2, i, (unsigned long long)p->shards[i].start,
             (unsigned long long)p->shards[i].end, (unsigned long long)((uint64_t)1 << L),
             L ? "s" : "", (unsigned long long)((uint64_t)1 << (p->request.qubits - L)));
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
    const unsigned L = qm_plan_iqp_local_bits(p);
    const uint64_t es = qm_dtype_size(p->request.dtype);
    for (int i = 0; i < p->n_shards; ++i)
        if (p->shards[i].device == device) { /* one shard per device but for replicated */
            const uint64_t pages = (p->shards[i].end - p->shards[i].start) >> L;
            return pages * qm_iqp_scratch_bytes(((uint64_t)1 << L) * es);
        }
    return 0;
}

unsigned qm_plan_iqp_exchanges(const qm_plan *p)
{
    /* log2 of the pages; a refused layout (still shown and costed by plan.c) has no exchanges */
    const unsigned x = p->request.qubits - qm_plan_iqp_local_bits(p);
    return x > QM_IQP_MAX_PAGE_LOG2 ? 0 : x;
}
