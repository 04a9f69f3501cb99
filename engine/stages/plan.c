/* plan.c — the plan stage: policies turn (mesh, request) into shards; then feasibility, gather,
 * frontier, the hint of an infeasible plan and estimates are attached (feasibility.c, cost.c).
 *
 * In: a mesh (devices in global index order: ranks in order, each rank's devices by affinity) and
 * a validated request. Out: a qm_plan. Pure and deterministic: no device memory, no randomness, ties
 * broken by mesh order.
 * Policies (docs/planner.md, "Policies"):
 *  - single: the whole state on one device: the best-connected device of rank 0 if it fits, else
 *    the first device in mesh order that fits;
 *  - equal: one page per device, device count a power of two, ranks holding equal device counts;
 *  - weighted: the smallest power-of-two page count P (>= the device count) for which the pages,
 *    apportioned by largest remainder in proportion to usable capacity (to the ranks by their
 *    summed capacity, then to each rank's devices), give every device at least one page and keep
 *    it within capacity; each device a contiguous run of pages; any rank count;
 *  - balanced: nearly equal contiguous ranges, the first N mod D devices one amplitude longer;
 *  - replicated: every device holds the whole state;
 *  - auto: the cheapest feasible of single, equal, weighted by the cost model (ties: that order);
 *    when none fits, balanced; when that does not fit, replicated (docs/planner.md).
 * An infeasible plan's message ends in a hint computed for the request (plan_hint): a policy that
 * fits, the largest state or batch that fits, or --gather none. The frontier searches
 * (qm_plan_frontier: qubits; qm_plan_max_batch: samples) back those hints and `plan --max`.
 * Batch requests (batch > 1) deal whole samples: equal/balanced with equal weights, weighted/auto by
 * usable capacity; single and replicated as above.
 * Must not: allocate device memory, print, or report devices by anything but mesh index / id.
 */
#include "feasibility.h"
#include "plan.h"
#include "status_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qm_plan_destroy(qm_plan *plan)
{
    if (!plan)
        return;
    free(plan->shards);
    free(plan->devices);
    free(plan->hosts);
    free(plan);
}

static qm_code plan_alloc(const qm_mesh *mesh, const qm_request *r, qm_plan **out, qm_status *st)
{
    qm_plan *p = calloc(1, sizeof *p);
    if (!p)
        return qm_fail(st, QM_E_NOMEM, "plan: out of host memory");
    p->devices = calloc((size_t)mesh->n_devices, sizeof *p->devices);
    /* at most one shard per device (replicated: one each) */
    p->shards = calloc((size_t)mesh->n_devices, sizeof *p->shards);
    p->n_hosts = mesh->topo ? mesh->topo->n_hosts : 0;
    p->hosts = calloc((size_t)(p->n_hosts ? p->n_hosts : 1), sizeof *p->hosts);
    if (!p->devices || !p->shards || !p->hosts) {
        qm_plan_destroy(p);
        return qm_fail(st, QM_E_NOMEM, "plan: out of host memory for %d devices", mesh->n_devices);
    }
    p->request = *r;
    p->n_amps = (uint64_t)1 << r->qubits;
    if (p->request.features == 0)
        p->request.features = qm_encoding_features(r->encoding, r->qubits);
    p->global_amplitudes = p->n_amps * r->batch;
    p->state_bytes = p->global_amplitudes * qm_dtype_size(r->dtype);
    p->n_devices = mesh->n_devices;
    p->policy = r->policy;
    p->gather.device = -1;
    qm_status_clear(&p->error);
    *out = p;
    return QM_OK;
}

/* Largest-remainder apportionment of `total` units over n weights (ties by index), each share at
 * most cap[i] (NULL: no caps). Returns false when the caps cannot hold the total. */
static bool apportion(uint64_t total, int n, const double *w, const uint64_t *cap, uint64_t *out)
{
    bool *fixed = calloc((size_t)n, sizeof *fixed);
    double *frac = malloc((size_t)n * sizeof *frac);
    bool ok = fixed && frac;
    uint64_t left = total;
    for (int round = 0; ok && round <= n; ++round) {
        double wsum = 0;
        for (int i = 0; i < n; ++i)
            if (!fixed[i])
                wsum += w[i];
        if (wsum <= 0) {
            ok = left == 0;
            break;
        }
        uint64_t given = 0;
        for (int i = 0; i < n; ++i) {
            if (fixed[i])
                continue;
            double exact = (double)left * (w[i] / wsum);
            out[i] = (uint64_t)floor(exact);
            frac[i] = exact - (double)out[i];
            given += out[i];
        }
        while (given < left) { /* hand out the remainder, largest fraction first */
            int best = -1;
            for (int i = 0; i < n; ++i)
                if (!fixed[i] && frac[i] >= 0 && (best < 0 || frac[i] > frac[best]))
                    best = i;
            if (best < 0)
                break;
            out[best]++;
            frac[best] = -1;
            given++;
        }
        while (given > left) { /* floating-point excess: take from the smallest fractions */
            for (int i = n - 1; i >= 0 && given > left; --i)
                if (!fixed[i] && out[i] > 0) {
                    out[i]--;
                    given--;
                }
        }
        bool over = false;
        for (int i = 0; cap && i < n; ++i) {
            if (!fixed[i] && out[i] > cap[i]) {
                out[i] = cap[i];
                fixed[i] = true;
                left -= cap[i];
                over = true;
            }
        }
        if (!over)
            break;
        if (round == n)
            ok = false;
    }
    free(fixed);
    free(frac);
    return ok;
}

/* Shards from per-device unit counts (mesh order), each unit `unit_amps` amplitudes long. */
static void shards_from_units(const qm_mesh *mesh, qm_plan *p, const uint64_t *units,
                              uint64_t unit_amps)
{
    uint64_t pos = 0;
    p->n_shards = 0;
    for (int d = 0; d < mesh->n_devices; ++d) {
        if (units[d] == 0)
            continue;
        qm_plan_shard *s = &p->shards[p->n_shards++];
        s->rank = mesh->devices[d].rank;
        s->device = d;
        s->start = pos;
        pos += units[d] * unit_amps;
        s->end = pos;
    }
}

/* Input values a shard [start, end) of the concatenated states reads: amplitude encoding the
 * values inside the range; the others every value of each state the range touches (a state's
 * amplitudes each depend on all of its sample's values). */
static uint64_t input_in(const qm_plan *p, uint64_t start, uint64_t end)
{
    const uint64_t N = p->n_amps, F = p->request.features;
    uint64_t total = 0;
    if (start >= end)
        return 0;
    uint64_t s0 = start / N, s1 = (end - 1) / N;
    if (p->request.encoding != QM_ENCODING_AMPLITUDE)
        return (s1 - s0 + 1) * F;
    for (uint64_t s = s0; s <= s1; ++s) {
        uint64_t lo = s == s0 ? start - s * N : 0, hi = s == s1 ? end - s * N : N;
        if (s == s0 + 1 && s < s1) { /* whole samples in between: s0 + 1 .. s1 - 1 */
            total += (s1 - s0 - 1) * F;
            s = s1 - 1;
            continue;
        }
        if (lo < F)
            total += (hi < F ? hi : F) - lo;
    }
    return total;
}

static void finish_shards(qm_plan *p)
{
    const uint64_t es = qm_dtype_size(p->request.dtype);
    for (int i = 0; i < p->n_shards; ++i) {
        qm_plan_shard *s = &p->shards[i];
        s->bytes = (s->end - s->start) * es;
        s->input_elems = input_in(p, s->start, s->end);
    }
}

static qm_code infeasible(qm_plan *p, qm_code code, qm_status *st, const char *fmt, ...)
    QM_PRINTF(4, 5);
static qm_code infeasible(qm_plan *p, qm_code code, qm_status *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    p->feasible = false;
    p->error.code = code;
    vsnprintf(p->error.msg, sizeof p->error.msg, fmt, ap);
    va_end(ap);
    if (st)
        *st = p->error;
    return code;
}

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int best_single_device(const qm_mesh *mesh)
{
    int best = 0;
    qm_status st;
    (void)qm_mesh_best_connected(mesh, 0, mesh->rank_first[1], &best, &st);
    return best;
}

static qm_code layout_single(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    if (mesh->n_ranks > 1)
        return infeasible(p, QM_E_POLICY, st, "plan: single places the whole state on one device "
                          "but %d ranks were requested",
                          mesh->n_ranks);
    const uint64_t need = p->state_bytes;
    int dev = best_single_device(mesh);
    if (mesh->devices[dev].usable_bytes < need)
        for (int d = 0; d < mesh->n_devices; ++d)
            if (mesh->devices[d].usable_bytes >= need) {
                dev = d;
                break;
            }
    p->n_shards = 1;
    p->shards[0] = (qm_plan_shard){.rank = 0, .device = dev, .start = 0, .end = p->global_amplitudes};
    p->pages = 1;
    return QM_OK;
}

/* Ranks must own equal power-of-two shares of the index space (the high bits). */
static qm_code check_rank_split(const qm_mesh *mesh, qm_plan *p, const char *policy, qm_status *st)
{
    if (mesh->n_ranks > 1 && !is_pow2((uint64_t)mesh->n_ranks))
        return infeasible(p, QM_E_POLICY, st, "plan: %s: %d ranks cannot own the high index bits; "
                          "the rank count must be a power of two", policy, mesh->n_ranks);
    return QM_OK;
}

static qm_code layout_equal(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    const int D = mesh->n_devices;
    if (p->request.batch > 1)
        return QM_OK; /* dealt as samples by the caller */
    if (!is_pow2((uint64_t)D))
        return infeasible(p, QM_E_NOT_POW2, st, "plan: equal needs a power-of-two device count, "
                          "but the mesh has %d devices", D);
    if ((uint64_t)D > p->n_amps)
        return infeasible(p, QM_E_SHARDS, st, "plan: equal: %d shards for %llu amplitudes (%u "
                          "qubits): more shards than amplitudes", D,
                          (unsigned long long)p->n_amps, p->request.qubits);
    qm_code rc = check_rank_split(mesh, p, "equal", st);
    if (rc != QM_OK)
        return rc;
    for (int r = 1; r < mesh->n_ranks; ++r)
        if (mesh->rank_first[r + 1] - mesh->rank_first[r] != mesh->rank_first[1])
            return infeasible(p, QM_E_POLICY, st, "plan: equal: rank 0 has %d devices but rank %d "
                              "has %d; ranks must own equal ranges", mesh->rank_first[1],
                              r, mesh->rank_first[r + 1] - mesh->rank_first[r]);
    uint64_t *units = malloc((size_t)D * sizeof *units);
    if (!units)
        return infeasible(p, QM_E_NOMEM, st, "plan: out of host memory");
    for (int d = 0; d < D; ++d)
        units[d] = 1;
    shards_from_units(mesh, p, units, p->n_amps / (uint64_t)D);
    free(units);
    p->pages = (uint64_t)D;
    return QM_OK;
}

/* The largest u with u * unit_bytes + staging_for(u * unit_input_bytes) <= usable, in O(1) (a
 * count-down from usable / unit_bytes took millions of steps for small pages: the fuzzer's
 * `plan --batch 600000109826 --qubits 20` spent 0.3 s here). staging_for(x) = min(x, S) with
 * S = 2 chunks, so a u that fits either has u * unit_input_bytes >= S and then
 * u <= (usable - S) / unit_bytes (every such u fits), or has u * unit_input_bytes < S and then
 * u <= usable / (unit_bytes + unit_input_bytes) (every such u fits); the answer is the larger. */
static uint64_t units_that_fit(uint64_t usable, uint64_t unit_bytes, uint64_t unit_input_bytes)
{
    const uint64_t S = 2 * QM_STAGING_CHUNK_BYTES;
    const uint64_t a = usable >= S ? (usable - S) / unit_bytes : 0;
    uint64_t both, b = 0;
    if (!__builtin_add_overflow(unit_bytes, unit_input_bytes, &both))
        b = usable / both;
    return a > b ? a : b;
}

/* Per-device weights (usable capacity, or 1 each) and, when unit_bytes > 0, per-device caps (units
 * that fit); per-rank sums of both (saturating). Returns false when out of host memory. */
static void deal_weights(const qm_mesh *mesh, bool by_capacity, uint64_t unit_bytes,
                         uint64_t unit_input_bytes, double *w, uint64_t *cap, double *rw,
                         uint64_t *rcap)
{
    for (int r = 0; r < mesh->n_ranks; ++r) {
        rw[r] = 0;
        rcap[r] = 0;
        for (int d = mesh->rank_first[r]; d < mesh->rank_first[r + 1]; ++d) {
            const qm_mesh_device *md = &mesh->devices[d];
            w[d] = by_capacity ? (double)md->usable_bytes : 1.0;
            rw[r] += w[d];
            if (cap) {
                cap[d] = units_that_fit(md->usable_bytes, unit_bytes, unit_input_bytes);
                if (__builtin_add_overflow(rcap[r], cap[d], &rcap[r]))
                    rcap[r] = UINT64_MAX;
            }
        }
    }
}

/* Deal `total` units (pages or samples) over the mesh in two steps, both by largest remainder
 * (ties by index): to the ranks in proportion to each rank's summed weight, then inside each rank
 * to its devices by weight; with `capped`, no device gets more units than fit on it (and a rank no
 * more than its devices hold). Equal ranks and a rank count dividing `total` give every rank
 * total/ranks units: ranks own the high index bits. Returns false when the caps cannot hold the
 * total, or (need_all) a device gets no unit. */
static bool deal_units_to(const qm_mesh *mesh, uint64_t total, uint64_t unit_bytes,
                          uint64_t unit_input_bytes, bool by_capacity, bool capped, bool need_all,
                          uint64_t *units)
{
    const int D = mesh->n_devices, R = mesh->n_ranks;
    double *w = malloc((size_t)D * sizeof *w), *rw = malloc((size_t)R * sizeof *rw);
    uint64_t *cap = malloc((size_t)D * sizeof *cap), *rcap = malloc((size_t)R * sizeof *rcap);
    uint64_t *share = malloc((size_t)R * sizeof *share);
    bool ok = w && rw && cap && rcap && share;
    for (int d = 0; d < D; ++d)
        units[d] = 0;
    if (ok)
        deal_weights(mesh, by_capacity, unit_bytes, unit_input_bytes, w, capped ? cap : NULL, rw,
                     rcap);
    if (ok)
        ok = apportion(total, R, rw, capped ? rcap : NULL, share);
    for (int r = 0; ok && r < R; ++r) {
        int f = mesh->rank_first[r], n = mesh->rank_first[r + 1] - f;
        ok = apportion(share[r], n, w + f, capped ? cap + f : NULL, units + f);
        for (int i = 0; ok && need_all && i < n; ++i)
            ok = units[f + i] > 0;
    }
    free(w);
    free(rw);
    free(cap);
    free(rcap);
    free(share);
    return ok;
}

static bool deal_units(const qm_mesh *mesh, uint64_t total, uint64_t unit_bytes,
                       uint64_t unit_input_bytes, bool by_capacity, bool need_all, uint64_t *units)
{
    return deal_units_to(mesh, total, unit_bytes, unit_input_bytes, by_capacity, true, need_all,
                         units);
}

/* The same deal without capacity caps: the layout an infeasible plan shows (out of host memory:
 * everything on device 0, which feasibility then names). */
static void deal_uncapped(const qm_mesh *mesh, uint64_t total, bool by_capacity, uint64_t *units)
{
    if (!deal_units_to(mesh, total, 1, 0, by_capacity, false, false, units)) {
        for (int d = 0; d < mesh->n_devices; ++d)
            units[d] = 0;
        units[0] = total;
    }
}

static qm_code layout_weighted(const qm_mesh *mesh, qm_plan *p, bool by_capacity, qm_status *st)
{
    const int D = mesh->n_devices;
    const uint64_t es = qm_dtype_size(p->request.dtype), is = es / 2;
    /* any rank count: pages (or samples) go to ranks in proportion to their capacity */
    uint64_t *units = calloc((size_t)D, sizeof *units);
    if (!units)
        return infeasible(p, QM_E_NOMEM, st, "plan: out of host memory");
    if (p->request.batch > 1) { /* whole samples */
        const uint64_t F = p->request.features;
        if (!deal_units(mesh, p->request.batch, p->n_amps * es, F * is, by_capacity, false, units))
            deal_uncapped(mesh, p->request.batch, by_capacity, units); /* feasibility names the overflow */
        shards_from_units(mesh, p, units, p->n_amps);
        p->pages = p->request.batch;
        free(units);
        return QM_OK;
    }
    uint64_t P = 1;
    while (P < (uint64_t)D)
        P *= 2;
    bool found = false;
    for (; P <= p->n_amps && P <= QM_MAX_PAGES; P *= 2) {
        const uint64_t page_amps = p->n_amps / P;
        if (deal_units(mesh, P, page_amps * es, page_amps * is, by_capacity, true, units)) {
            found = true;
            break;
        }
    }
    if (!found) {
        if ((uint64_t)D > p->n_amps) {
            free(units);
            return infeasible(p, QM_E_SHARDS, st, "plan: %s: %d devices for %llu amplitudes (%u "
                              "qubits): more shards than amplitudes", qm_policy_name(p->request.policy),
                              D, (unsigned long long)p->n_amps, p->request.qubits);
        }
        /* nothing fits: lay out the finest proportional deal without caps so that feasibility
         * names the device that overflows */
        P = (uint64_t)1 << 62;
        while (P > p->n_amps || P > QM_MAX_PAGES)
            P /= 2;
        deal_uncapped(mesh, P, by_capacity, units);
    }
    shards_from_units(mesh, p, units, p->n_amps / P);
    p->pages = P;
    free(units);
    return QM_OK;
}

static qm_code layout_balanced(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    const int D = mesh->n_devices;
    if (p->request.batch > 1)
        return layout_weighted(mesh, p, false, st);
    if ((uint64_t)D > p->n_amps)
        return infeasible(p, QM_E_SHARDS, st, "plan: balanced: %d shards for %llu amplitudes (%u "
                          "qubits): more shards than amplitudes (no shard may be empty)", D,
                          (unsigned long long)p->n_amps, p->request.qubits);
    const uint64_t base = p->n_amps / (uint64_t)D, extra = p->n_amps % (uint64_t)D;
    uint64_t pos = 0;
    for (int d = 0; d < D; ++d) {
        qm_plan_shard *s = &p->shards[d];
        s->rank = mesh->devices[d].rank;
        s->device = d;
        s->start = pos;
        pos += base + ((uint64_t)d < extra ? 1 : 0);
        s->end = pos;
    }
    p->n_shards = D;
    p->pages = 0; /* not page-aligned */
    return QM_OK;
}

static qm_code layout_replicated(const qm_mesh *mesh, qm_plan *p)
{
    for (int d = 0; d < mesh->n_devices; ++d)
        p->shards[d] = (qm_plan_shard){.rank = mesh->devices[d].rank, .device = d, .start = 0,
                                       .end = p->global_amplitudes};
    p->n_shards = mesh->n_devices;
    p->pages = 1;
    return QM_OK;
}

static uint64_t plan_hash(const qm_plan *p)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(v)                                                                                     \
    do {                                                                                           \
        uint64_t v_ = (uint64_t)(v);                                                               \
        for (int b_ = 0; b_ < 8; ++b_) {                                                           \
            h ^= (v_ >> (8 * b_)) & 0xFF;                                                          \
            h *= 1099511628211ull;                                                                 \
        }                                                                                          \
    } while (0)
    MIX(p->request.qubits);
    MIX(p->request.dtype);
    MIX(p->policy);
    MIX(p->request.batch);
    MIX(p->request.features);
    MIX(p->request.encoding);
    MIX(p->n_shards);
    for (int i = 0; i < p->n_shards; ++i) {
        MIX(p->shards[i].rank);
        MIX(p->shards[i].device);
        MIX(p->shards[i].start);
        MIX(p->shards[i].end);
    }
#undef MIX
    return h;
}

/* Layout for one concrete policy (not auto), then feasibility. */
static qm_code layout_policy(const qm_mesh *mesh, qm_plan *p, qm_policy pol, qm_status *st)
{
    qm_code rc;
    p->policy = pol;
    p->feasible = true;
    qm_status_clear(&p->error);
    p->n_shards = 0;
    switch (pol) {
    case QM_POLICY_SINGLE: rc = layout_single(mesh, p, st); break;
    case QM_POLICY_EQUAL:
        rc = p->request.batch > 1 ? layout_weighted(mesh, p, false, st) : layout_equal(mesh, p, st);
        break;
    case QM_POLICY_WEIGHTED: rc = layout_weighted(mesh, p, true, st); break;
    case QM_POLICY_BALANCED: rc = layout_balanced(mesh, p, st); break;
    case QM_POLICY_REPLICATED: rc = layout_replicated(mesh, p); break;
    default: rc = infeasible(p, QM_E_POLICY, st, "plan: policy %d has no layout", (int)pol);
    }
    if (rc != QM_OK)
        return rc;
    finish_shards(p);
    rc = qm_feasibility_check(mesh, p, st);
    if (rc == QM_OK) /* the simulator's devices live in host memory */
        rc = qm_feasibility_host_check(mesh, p, st);
    /* iqp (plan_iqp.c): a layout the transform cannot use is refused, capacity or not */
    const qm_code irc = qm_plan_iqp_layout(p, st);
    return irc != QM_OK ? irc : rc;
}

static double plan_cost(const qm_plan *p)
{
    return p->estimates_s[QM_PHASE_INGEST] + p->estimates_s[QM_PHASE_LOCAL_NORM] +
           p->estimates_s[QM_PHASE_NORM_ALLREDUCE] + p->estimates_s[QM_PHASE_ENCODE];
}

/* auto's candidates in tie order, by tier: 0 = one copy, page-aligned (single, equal, weighted);
 * 1 = balanced (one copy, not page-aligned); 2 = replicated (a copy per device). auto keeps the
 * cheapest feasible candidate of the lowest tier that has one; ties keep the earlier. */
static const struct {
    qm_policy policy;
    int tier;
} auto_cands[] = {{QM_POLICY_SINGLE, 0},   {QM_POLICY_EQUAL, 0},      {QM_POLICY_WEIGHTED, 0},
                  {QM_POLICY_BALANCED, 1}, {QM_POLICY_REPLICATED, 2}};

/* auto: the cheapest feasible candidate (with estimates when asked; feasibility alone otherwise,
 * which is all the frontier needs: the first feasible one). */
static qm_code layout_auto(const qm_mesh *mesh, qm_plan *p, bool with_cost, qm_status *st)
{
    const int n_cands = (int)(sizeof auto_cands / sizeof *auto_cands);
    qm_plan *best = NULL, *trial = NULL;
    int best_tier = 0;
    qm_code rc = QM_OK;
    double best_cost = INFINITY;
    for (int c = 0; c < n_cands; ++c) {
        if (best && auto_cands[c].tier > best_tier)
            break;
        if ((rc = plan_alloc(mesh, &p->request, &trial, st)) != QM_OK)
            goto done;
        qm_status tst;
        if (layout_policy(mesh, trial, auto_cands[c].policy, &tst) == QM_OK) {
            double cost = 0;
            if (with_cost) {
                if ((rc = qm_cost_estimate(mesh, trial, st)) != QM_OK)
                    goto done;
                cost = plan_cost(trial);
            }
            if (!best || cost < best_cost) {
                qm_plan_destroy(best);
                best = trial;
                best_cost = cost;
                best_tier = auto_cands[c].tier;
                trial = NULL;
                if (!with_cost)
                    break;
            }
        }
        qm_plan_destroy(trial);
        trial = NULL;
    }
    if (best) {
        /* adopt the best layout into p */
        memcpy(p->shards, best->shards, (size_t)best->n_shards * sizeof *p->shards);
        memcpy(p->devices, best->devices, (size_t)best->n_devices * sizeof *p->devices);
        memcpy(p->hosts, best->hosts, (size_t)best->n_hosts * sizeof *p->hosts);
        p->host_checked = best->host_checked;
        p->host_over = best->host_over;
        p->local_planned_bytes = best->local_planned_bytes;
        p->n_shards = best->n_shards;
        p->pages = best->pages;
        p->policy = best->policy;
        p->feasible = true;
        qm_status_clear(&p->error);
        memcpy(p->estimates_s, best->estimates_s, sizeof p->estimates_s);
        memcpy(p->estimate_set, best->estimate_set, sizeof p->estimate_set);
        p->has_estimates = best->has_estimates;
        rc = QM_OK;
    } else {
        /* nothing fits: show weighted's layout (it serves any mesh) and its error; p->policy
         * stays weighted, the policy whose layout the plan shows (docs/cli.md) */
        qm_status wst;
        rc = layout_policy(mesh, p, QM_POLICY_WEIGHTED, &wst);
        if (rc == QM_E_NOMEM || rc == QM_E_INTERNAL) {
            if (st)
                *st = wst;
        } else {
            char msg[sizeof wst.msg];
            snprintf(msg, sizeof msg, "%s", p->error.msg);
            rc = infeasible(p, rc != QM_OK ? rc : QM_E_CAPACITY, st, "%s", msg);
        }
    }
done:
    qm_plan_destroy(best);
    qm_plan_destroy(trial);
    return rc;
}

/* The steps both entry points share: check arguments and request, allocate, lay out (auto: with
 * the cost model when with_cost). Returns the layout's code; *out is NULL only for invalid
 * requests and out-of-memory. */
static qm_code plan_begin(const qm_mesh *mesh, const qm_request *r, bool with_cost, qm_plan **out,
                          qm_status *st)
{
    qm_plan *p = NULL;
    if (out)
        *out = NULL;
    if (!mesh || !r || !out)
        return qm_fail(st, QM_E_ARG, "plan: mesh, request and out must not be NULL");
    qm_code rc = qm_request_validate(r, mesh->topo ? mesh->topo->n_ranks : mesh->n_ranks, st);
    if (rc != QM_OK || (rc = plan_alloc(mesh, r, &p, st)) != QM_OK)
        return rc;
    qm_status lst;
    qm_status_clear(&lst);
    rc = r->policy == QM_POLICY_AUTO ? layout_auto(mesh, p, with_cost, &lst)
                                     : layout_policy(mesh, p, r->policy, &lst);
    if (st)
        *st = lst;
    if (rc == QM_E_NOMEM || rc == QM_E_INTERNAL) {
        qm_plan_destroy(p);
        return rc;
    }
    *out = p;
    return rc;
}

qm_code qm_plan_layout(const qm_mesh *mesh, const qm_request *r, qm_plan **out, qm_status *st)
{
    qm_code rc = plan_begin(mesh, r, false, out, st);
    return out && *out ? ((*out)->feasible ? QM_OK : (*out)->error.code) : rc;
}

/* Layout and feasibility of a valid request: true when it fits. */
static bool plan_fits(const qm_mesh *mesh, const qm_request *q)
{
    qm_plan *p = NULL;
    qm_status st;
    const qm_code rc = qm_plan_layout(mesh, q, &p, &st);
    qm_plan_destroy(p);
    return rc == QM_OK;
}

void qm_plan_frontier(const qm_mesh *mesh, const qm_request *r, unsigned out[2])
{
    static const qm_dtype dts[2] = {QM_DTYPE_COMPLEX64, QM_DTYPE_COMPLEX128};
    /* every policy stores each amplitude at least once within usable memory, so a state larger
     * than the mesh's whole usable memory is infeasible without laying it out (saturating sum) */
    uint64_t usable = 0;
    for (int d = 0; d < mesh->n_devices; ++d)
        if (__builtin_add_overflow(usable, mesh->devices[d].usable_bytes, &usable))
            usable = UINT64_MAX;
    for (int k = 0; k < 2; ++k) {
        out[k] = 0;
        qm_request q = *r;
        q.dtype = dts[k];
        q.features = 0;
        for (unsigned n = 62; n >= 1; --n) {
            q.qubits = n;
            uint64_t bytes;
            const uint64_t states = q.batch > 1 ? q.batch : 1;
            if (n < 64 && !__builtin_mul_overflow((uint64_t)1 << n, qm_dtype_size(q.dtype), &bytes) &&
                !__builtin_mul_overflow(bytes, states, &bytes) && bytes > usable)
                continue;
            qm_status st;
            if (qm_request_validate(&q, mesh->topo ? mesh->topo->n_ranks : mesh->n_ranks, &st) != QM_OK)
                continue;
            qm_plan *p = NULL;
            qm_code rc = qm_plan_layout(mesh, &q, &p, &st);
            qm_plan_destroy(p);
            if (rc == QM_OK) {
                out[k] = n;
                break;
            }
        }
    }
}

uint64_t qm_plan_max_batch(const qm_mesh *mesh, const qm_request *r)
{
    qm_request q = *r;
    const int ranks = mesh->topo ? mesh->topo->n_ranks : mesh->n_ranks;
    qm_status st;
    if (q.qubits < 1 || q.qubits > 62)
        return 0;
    const uint64_t sample_bytes = ((uint64_t)1 << q.qubits) * qm_dtype_size(q.dtype);
    if (sample_bytes == 0)
        return 0;
    /* every sample occupies sample_bytes on some device: the usable total bounds the batch */
    uint64_t total = 0;
    for (int d = 0; d < mesh->n_devices; ++d)
        if (__builtin_add_overflow(total, mesh->devices[d].usable_bytes, &total))
            total = UINT64_MAX;
    uint64_t hi = total / sample_bytes;
    const uint64_t cap = UINT64_MAX / sample_bytes; /* validate.c's 64-bit byte-count cap */
    if (hi > cap)
        hi = cap;
#define FITS(b) (q.batch = (b), qm_request_validate(&q, ranks, &st) == QM_OK &&                   \
                 plan_fits(mesh, &q))
    /* batch 1 is a single state (pages); from 2 on whole samples are dealt, and feasibility only
     * falls as the batch grows, so the largest is found by bisection */
    uint64_t lo = hi >= 1 && FITS(1) ? 1 : 0;
    if (hi < 2 || !FITS(2))
        return lo;
    lo = 2;
    while (lo < hi) { /* invariant: lo fits, everything above hi does not */
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (FITS(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
#undef FITS
    return lo;
}

qm_policy qm_plan_auto_choice(const qm_mesh *mesh, const qm_request *r)
{
    qm_request q = *r;
    q.policy = QM_POLICY_AUTO;
    qm_plan *p = NULL;
    qm_status st;
    (void)plan_begin(mesh, &q, true, &p, &st);
    const qm_policy pick = p && p->feasible ? p->policy : QM_POLICY_AUTO;
    qm_plan_destroy(p);
    return pick;
}

qm_code qm_plan_max_query(const qm_mesh *mesh, const qm_request *r, qm_plan_max *out,
                          qm_status *st)
{
    static const qm_dtype dts[2] = {QM_DTYPE_COMPLEX64, QM_DTYPE_COMPLEX128};
    memset(out, 0, sizeof *out);
    out->batch = r->features > 0;
    out->features = r->features;
    qm_request q = *r;
    q.batch = 1;
    q.gather[0] = '\0';
    if (out->batch) {
        out->qubits = qm_qubits_for_values(r->features);
        if (out->qubits > qm_request_max_qubits(QM_DTYPE_COMPLEX64, 1))
            return qm_fail(st, QM_E_INPUT, "plan: --max: %llu features need %u qubits, more than "
                           "the 64-bit cap (%u qubits of complex64); use at most %llu features",
                           (unsigned long long)r->features, out->qubits,
                           qm_request_max_qubits(QM_DTYPE_COMPLEX64, 1),
                           1ull << qm_request_max_qubits(QM_DTYPE_COMPLEX64, 1));
        q.qubits = out->qubits;
    } else {
        q.features = 0;
    }
    for (int pol = 0; pol < QM_POLICY_COUNT_; ++pol) {
        q.policy = (qm_policy)pol;
        if (!out->batch) {
            unsigned mq[2];
            qm_plan_frontier(mesh, &q, mq);
            out->value[0][pol] = mq[0];
            out->value[1][pol] = mq[1];
            continue;
        }
        for (int k = 0; k < 2; ++k) {
            q.dtype = dts[k];
            out->value[k][pol] = qm_plan_max_batch(mesh, &q);
        }
    }
    for (int k = 0; k < 2; ++k) {
        out->auto_pick[k] = QM_POLICY_AUTO;
        const uint64_t v = out->value[k][QM_POLICY_AUTO];
        if (!v)
            continue;
        q.dtype = dts[k];
        if (out->batch)
            q.batch = v;
        else
            q.qubits = (unsigned)v;
        out->auto_pick[k] = qm_plan_auto_choice(mesh, &q);
    }
    return QM_OK;
}

/* Append "; <hint>" to an infeasible plan's message: something that works. A capacity error names
 * the largest request of the same shape that fits (state: qubits, same dtype and policy; batch:
 * samples, same features); a policy that cannot serve the mesh names the policy auto would pick
 * for the same request. When nothing of that shape fits the policy, the largest that auto fits. */
static void plan_hint(const qm_mesh *mesh, qm_plan *p)
{
    const qm_request *r = &p->request;
    const char *dt = qm_dtype_name(r->dtype);
    const int k = r->dtype == QM_DTYPE_COMPLEX128 ? 1 : 0;
    const size_t len = strlen(p->error.msg);
    char *tail = p->error.msg + len;
    const size_t room = sizeof p->error.msg - len;
    const qm_code code = p->error.code;
    /* host memory (the simulator) is what nothing fits: the ways round it */
    const char *alt = p->host_over ? " in host memory; use --phantom (no memory), or --backend "
                                     "cuda on GPUs" : "";
    bool any_policy = false;
    if (code != QM_E_CAPACITY) {
        if (code != QM_E_POLICY && code != QM_E_NOT_POW2 && code != QM_E_SHARDS)
            return;
        const qm_policy pick = qm_plan_auto_choice(mesh, r);
        if (pick != QM_POLICY_AUTO) {
            snprintf(tail, room, "; use --policy %s", qm_policy_name(pick));
            return;
        }
        any_policy = r->policy != QM_POLICY_AUTO; /* nothing fits it: the largest auto fits */
    }
    /* the largest under the request's policy; when nothing fits it, the largest under auto */
    for (;; any_policy = true) {
        qm_request q = *r;
        if (any_policy)
            q.policy = QM_POLICY_AUTO;
        const char *with = any_policy ? " with --policy auto" : "";
        const bool last = any_policy || r->policy == QM_POLICY_AUTO;
        if (r->batch > 1) {
            const uint64_t b = qm_plan_max_batch(mesh, &q);
            if (b)
                snprintf(tail, room, "; largest batch that fits is %llu (%llu features, %s%s)",
                         (unsigned long long)b, (unsigned long long)r->features, dt, with);
            else if (last)
                snprintf(tail, room, "; not one sample of %llu features fits (%s) under any policy%s",
                         (unsigned long long)r->features, dt, alt);
            if (b || last)
                return;
            continue;
        }
        unsigned mq[2] = {p->max_qubits[0], p->max_qubits[1]};
        if (any_policy)
            qm_plan_frontier(mesh, &q, mq);
        if (mq[k])
            snprintf(tail, room, "; largest state that fits is %u qubits (%s)%s", mq[k], dt, with);
        else if (last)
            snprintf(tail, room, "; no %s state fits under any policy%s", dt, alt);
        if (mq[k] || last)
            return;
    }
}

qm_code qm_plan_create(const qm_mesh *mesh, const qm_request *r, qm_plan **out, qm_status *st)
{
    qm_plan *p = NULL;
    if (out)
        *out = NULL;
    qm_code rc = out ? plan_begin(mesh, r, true, &p, st)
                     : qm_fail(st, QM_E_ARG, "plan: mesh, request and out must not be NULL");
    if (!p)
        return rc;
    qm_plan_frontier(mesh, &p->request, p->max_qubits);
    p->has_max_qubits = true;
    if (!p->feasible)
        plan_hint(mesh, p);
    if (p->n_shards > 0) {
        qm_status cst;
        if ((rc = qm_gather_plan(mesh, p, &cst)) == QM_OK && !p->has_estimates)
            rc = qm_cost_estimate(mesh, p, &cst);
        if (rc == QM_OK && p->gather.requested && !p->estimate_set[QM_PHASE_GATHER])
            rc = qm_cost_estimate(mesh, p, &cst);
        if (rc != QM_OK) {
            if (st)
                *st = cst;
            qm_plan_destroy(p);
            return rc;
        }
    }
    if (p->feasible && p->gather.requested && !p->gather.feasible &&
        strcmp(p->request.gather, "auto") != 0)
        infeasible(p, QM_E_NO_GATHER, NULL, "plan: gather to %s: %s; use --gather none",
                   p->gather.target, p->gather.reason);
    p->hash = plan_hash(p);
    if (st)
        *st = p->error;
    *out = p;
    return p->feasible ? QM_OK : p->error.code;
}
