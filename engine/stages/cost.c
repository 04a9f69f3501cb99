/* cost.c — the cost model (docs/planner.md, "Cost model"): estimates for ingest, local norm, norm
 * all-reduce, encode write and gather, from the scenario's figures.
 *
 * In: a plan with shards and device accounting, the mesh and its topology graph. Out:
 * plan->estimates_s (seconds) with estimate_set flags (a phase without the figures it needs, e.g.
 * no HBM bandwidth or no host path, is left unset and prints as null).
 * Model (docs/planner.md):
 *  - transfers (ingest host->device over each device's NUMA->GPU path; gather device->target or
 *    device->host): every flow is charged to every link (and direction) on its path; the phase
 *    takes max over links of (bytes crossing / bandwidth x class efficiency) plus the largest path
 *    latency. Shared links (a switch uplink, a socket link) are thus charged for all their flows;
 *  - local norm: max over devices of shard bytes / (HBM bandwidth x hbm efficiency) (one read);
 *  - encode: max over devices of 2 x shard bytes / (HBM x efficiency) (read the stash, write the
 *    amplitudes in place);
 *  - norm all-reduce of 8 bytes, NCCL's ring model: 6.6 us base + (2(p-1) - s) intra-host steps at
 *    the per-step latency of the worst intra-host class on the ring + s = 2(hosts-1) inter-host
 *    steps at the net latency, + 2(p-1)/p x bytes / ring bandwidth; across hosts the lower of that
 *    and a tree (6.6 us + 2 (devices per host - 1) intra steps + 2 ceil(log2 hosts) net steps
 *    + 2 bytes / bandwidth); 0 for one device and for replicated states; for batches (each
 *    sample's norm is local) the host's merge and coefficients, B x defaults.host_batch.coefficients;
 *  - an amplitude batch's local_norm also has the host's piece sums: the most states of any
 *    rank x defaults.host_batch.pieces (topo dump measures both with the encode's own functions:
 *    qm_materialize_host_probe);
 *  - angle, basis, phase, iqp-z (a product state: docs/encodings.md): no norm pass and no all-reduce (the states are normalized by
 *    construction); encode = max over devices of shard bytes / (HBM x efficiency) (one write);
 *  - iqp (plan_iqp.c): no norm pass; encode = max over devices of shard bytes x passes /
 *    (HBM x efficiency), passes = the default iqp op's (qm_hal_iqp_passes: 1 for the phases with
 *    stages 0..9, + 2 per round-3 pass of the higher stages; 3 below 2^10 slots) + 4 per
 *    exchange; plus, when the state is cut, each exchange
 *    stage's flows (every shard to its partner) on the links, stage after stage;
 *  - the data path (qm_cost_datapath, when the plan knows its input file or output): read (the
 *    input's page-cache residency at storage.cached_read, the rest at storage.read), staging (on
 *    devices: ingest = the setup outside the reads + the read overlapped with the copies and
 *    their launches, chunk by chunk, the copies after the staging's open; staging = ingest -
 *    read), write (the read-back overlapped with the file write, + the removal of the output it
 *    replaces); on devices the launches of local_norm and encode at defaults.launch and
 *    local_norm's round trip at defaults.piece_roots, and the fused batch path's passes inside the
 *    ingest (plan.h, docs/planner.md "Data path").
 * Must not: allocate device memory or change the layout.
 */
#include "feasibility.h"
#include "plan.h"
#include "status_internal.h"
#include "ingest.h"
#include "tree_sum.h"
#include "hal_ops.h"

#include <math.h>
#include <stdlib.h>

#define QM_NCCL_BASE_LATENCY_S 6.6e-6

typedef struct link_loads {
    int n_links;
    double *bytes;      /* 2 * n_links: [2l] a->b, [2l+1] b->a */
    double max_latency;
    bool any;
    bool broken;        /* a flow without a path */
} link_loads;

static qm_code loads_init(link_loads *L, const qm_topo_graph *g, qm_status *st)
{
    L->n_links = qm_topo_graph_link_count(g);
    L->bytes = calloc((size_t)(L->n_links > 0 ? L->n_links : 1) * 2, sizeof *L->bytes);
    L->max_latency = 0;
    L->any = L->broken = false;
    if (!L->bytes)
        return qm_fail(st, QM_E_NOMEM, "cost: out of host memory");
    return QM_OK;
}

static void loads_add(link_loads *L, const qm_topo_path *p, uint64_t bytes)
{
    if (!p->found) {
        L->broken = true;
        return;
    }
    L->any = true;
    for (int k = 0; k < p->hops; ++k)
        L->bytes[2 * p->links[k] + (p->a_to_b[k] ? 0 : 1)] += (double)bytes;
    if (p->latency_s > L->max_latency)
        L->max_latency = p->latency_s;
}

/* max over link directions of load / bandwidth, plus the largest latency; <0 when unusable */
static double loads_time(const link_loads *L, const qm_topo_graph *g)
{
    if (L->broken)
        return -1;
    if (!L->any)
        return 0;
    double t = 0;
    for (int l = 0; l < L->n_links; ++l)
        for (int dir = 0; dir < 2; ++dir) {
            double b = L->bytes[2 * l + dir];
            if (b <= 0)
                continue;
            double bw = qm_topo_graph_link_bw(g, l, dir == 0);
            if (!(bw > 0))
                return -1;
            if (b / bw > t)
                t = b / bw;
        }
    return t + L->max_latency;
}

/* Ring positions grouped into runs of one host (run[i] = the first position of i's run), and
 * whether each run's devices hang off one switch (qm_topo_graph_uniform_hub: then every step
 * inside it is that pair, without a search per device; a one-host ring of 8192 devices would
 * otherwise search from every device through an 8192-port switch). */
static bool *uniform_runs(const qm_mesh *mesh, const int *devices, int n, int *run,
                          qm_topo_pair *pair)
{
    bool *uni = calloc((size_t)n, sizeof *uni);
    int *nodes = malloc((size_t)n * sizeof *nodes);
    if (!uni || !nodes) {
        free(uni);
        free(nodes);
        return NULL;
    }
    for (int s = 0, e; s < n; s = e) {
        for (e = s; e < n && mesh->devices[devices[e]].host == mesh->devices[devices[s]].host; ++e) {
            run[e] = s;
            nodes[e - s] = mesh->devices[devices[e]].node;
        }
        uni[s] = qm_topo_graph_uniform_hub(mesh->graph, nodes, e - s, NULL, &pair[s]);
    }
    free(nodes);
    return uni;
}

/* Why device d has no path from host memory, in words a scenario author can act on. */
static void no_host_path(const qm_mesh *mesh, int d, const char *what, char *out, size_t cap)
{
    const qm_topology *t = mesh->topo;
    const qm_node *n = &t->nodes[mesh->devices[d].node];
    if (n->numa >= 0)
        snprintf(out, cap, "%s n/a: no path from %.63s to device '%.63s' (add a link from the NUMA node)",
                 what, t->nodes[n->numa].id, n->id);
    else
        snprintf(out, cap, "%s n/a: device '%.63s' names no NUMA node (give it numa: K, with "
                 "numa: [{id: K}] on its host)", what, n->id);
}

double qm_cost_allreduce_s(const qm_mesh *mesh, const int *devices, int n, uint64_t bytes)
{
    if (n <= 1)
        return 0;
    const qm_topology *t = mesh->topo;
    int hosts = 1;
    bool inter_seen = false;
    qm_link_class intra = QM_LINK_NVLINK;
    double ring_bw = INFINITY;
    int *run = malloc((size_t)n * sizeof *run);
    qm_topo_pair *pair = malloc((size_t)n * sizeof *pair);
    bool *uni = run && pair ? uniform_runs(mesh, devices, n, run, pair) : NULL;
    if (!uni) {
        free(run);
        free(pair);
        return -1;
    }
    for (int i = 0; i < n; ++i) {
        const qm_mesh_device *a = &mesh->devices[devices[i]];
        const qm_mesh_device *b = &mesh->devices[devices[(i + 1) % n]];
        const bool same_host = a->host == b->host;
        if (i + 1 < n && !same_host)
            hosts++;
        /* every intra-host step is looked at; of the host-to-host steps one stands for all (the
         * ring's inter-host hops cross the same kind of NIC and fabric), so a 1024-host ring costs
         * one cross-cluster search, not 1024 */
        if (!same_host && inter_seen)
            continue;
        inter_seen = inter_seen || !same_host;
        const int j = (i + 1) % n;
        qm_topo_path p;
        qm_status st;
        if (same_host && run[i] == run[j] && uni[run[i]]) {
            p.found = true;
            p.cls = pair[run[i]].cls;
            p.bw_bytes_per_s = pair[run[i]].bw_bytes_per_s;
        } else if (qm_topo_graph_path(mesh->graph, a->node, b->node, &p, &st) != QM_OK) {
            p.found = false;
        }
        if (!p.found) {
            ring_bw = -1;
            break;
        }
        if (p.bw_bytes_per_s < ring_bw)
            ring_bw = p.bw_bytes_per_s;
        if (same_host && p.cls > intra)
            intra = p.cls;
    }
    free(run);
    free(pair);
    free(uni);
    if (ring_bw < 0)
        return -1;
    const int steps = 2 * (n - 1), inter = 2 * (hosts - 1);
    const double ring = QM_NCCL_BASE_LATENCY_S + (double)(steps - inter) * t->latency_s[intra] +
                        (double)inter * t->latency_s[QM_LINK_NET] +
                        2.0 * (double)(n - 1) / (double)n * (double)bytes / ring_bw;
    if (hosts == 1)
        return ring; /* NCCL runs rings inside a node */
    /* across hosts NCCL also has trees: a chain inside each host and a binary tree between hosts,
     * up and down: 2 (per-host devices - 1) intra steps + 2 ceil(log2 hosts) net steps */
    int per_host = (n + hosts - 1) / hosts, levels = 0;
    while ((1 << levels) < hosts)
        ++levels;
    const double tree = QM_NCCL_BASE_LATENCY_S + 2.0 * (double)(per_host - 1) * t->latency_s[intra] +
                        2.0 * (double)levels * t->latency_s[QM_LINK_NET] +
                        2.0 * (double)bytes / ring_bw;
    return tree < ring ? tree : ring;
}

/* The path target -> src turned around: the same links crossed the other way (the search runs
 * once from the target, not once per source). */
static void reverse_path(qm_topo_path *p)
{
    for (int i = 0, j = p->hops - 1; i < j; ++i, --j) {
        int l = p->links[i];
        bool d = p->a_to_b[i];
        p->links[i] = p->links[j];
        p->a_to_b[i] = p->a_to_b[j];
        p->links[j] = l;
        p->a_to_b[j] = d;
    }
    for (int k = 0; k < p->hops; ++k)
        p->a_to_b[k] = !p->a_to_b[k];
    int s = p->src;
    p->src = p->dst;
    p->dst = s;
}

/* IQP passes over a shard at HBM bandwidth, as the CUDA backend's default iqp op runs them
 * (qm_hal_iqp_passes, on kernels/qm_passes.h's rule: the kernels' own split), over its local bits
 * (a cut state: the page's, qm_plan_iqp_local_bits; else the state's): with at least 10
 * local bits, 1 (the phases and stages 0..9 written in one pass) + 2 per round-3 pass of the
 * higher stages (read and write; at most 8 stages a pass, at most ceil(bits / 10) passes: 3 for
 * stages 10..29); below 10 bits, 3 (the phases written, then one read and write for every
 * stage); + 4 per exchange (the partner's data written into scratch, then own and scratch read
 * and own written). */
static double iqp_passes(const qm_plan *p)
{
    unsigned lb = 0;
    if (qm_plan_iqp_exchanges(p) > 0) {
        lb = qm_plan_iqp_local_bits(p);
    } else {
        uint64_t amps = p->n_shards > 0 ? p->shards[0].end - p->shards[0].start : p->n_amps;
        if (amps > p->n_amps)
            amps = p->n_amps; /* whole states: the transform is the state's */
        while (((uint64_t)1 << lb) < amps)
            ++lb;
    }
    return (double)qm_hal_iqp_passes(lb) + 4.0 * qm_plan_iqp_exchanges(p);
}

/* The shard holding amplitude g (the shards of a cut state lie in order), or -1. */
static int iqp_shard_of(const qm_plan *p, uint64_t g)
{
    int lo = 0, hi = p->n_shards - 1;
    while (lo <= hi) {
        const int mid = lo + (hi - lo) / 2;
        if (g < p->shards[mid].start)
            hi = mid - 1;
        else if (g >= p->shards[mid].end)
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

/* The IQP exchanges over the fabric: stage k (of the page bits) pairs page g with page g ^ 2^k,
 * each receiving its partner's page from the partner's device (pages on one device move no
 * bytes on the fabric: their copy is one of the passes above); each stage's time is that of its
 * flows on the links (loads_time), the stages one after another. The pages of a shard whose
 * partners lie in one shard make one flow. Negative when a path is missing. */
static double iqp_exchange_s(const qm_mesh *mesh, const qm_plan *p, link_loads *L, qm_status *st,
                             qm_code *rc)
{
    double total = 0;
    const unsigned X = qm_plan_iqp_exchanges(p), lb = qm_plan_iqp_local_bits(p);
    const uint64_t page = (uint64_t)1 << lb, es = qm_dtype_size(p->request.dtype);
    for (unsigned k = 0; k < X; ++k) {
        for (int l = 0; l < 2 * L->n_links; ++l)
            L->bytes[l] = 0;
        L->max_latency = 0;
        L->any = L->broken = false;
        const uint64_t bit = page << k;
        for (int i = 0; i < p->n_shards; ++i) {
            int run_j = -1;
            uint64_t run_bytes = 0;
            for (uint64_t g = p->shards[i].start; g <= p->shards[i].end; g += page) {
                const int j = g < p->shards[i].end ? iqp_shard_of(p, g ^ bit) : -2;
                if (j == run_j) {
                    run_bytes += page * es;
                    continue;
                }
                if (run_j >= 0 && p->shards[run_j].device != p->shards[i].device) {
                    qm_topo_path path; /* run_j's device -> i's */
                    if ((*rc = qm_topo_graph_path(mesh->graph,
                                                  mesh->devices[p->shards[i].device].node,
                                                  mesh->devices[p->shards[run_j].device].node,
                                                  &path, st)) != QM_OK)
                        return -1;
                    reverse_path(&path);
                    loads_add(L, &path, run_bytes);
                }
                run_j = j;
                run_bytes = page * es;
            }
        }
        const double t = loads_time(L, mesh->graph);
        if (t < 0)
            return -1;
        total += t;
    }
    return total;
}

qm_code qm_gather_path(const qm_mesh *mesh, const qm_plan *p, int device, qm_topo_path *out,
                       qm_status *st)
{
    if (p->gather.device < 0)
        return qm_topo_graph_ingest_path(mesh->graph, mesh->devices[device].node, false, out, st);
    qm_code rc = qm_topo_graph_path(mesh->graph, mesh->devices[p->gather.device].node,
                                    mesh->devices[device].node, out, st);
    if (rc == QM_OK)
        reverse_path(out);
    return rc;
}

/* local_norm's host work (defaults.host_batch.pieces per state): the most states any rank forms piece
 * sums of (its shards' states; replicated: one copy per rank, as materialize.c sums only its
 * first shard); 0 but for an amplitude batch (one state's few pieces are not modelled); <0 when
 * out of host memory. */
static double host_pieces_s(const qm_mesh *mesh, const qm_plan *p)
{
    if (p->request.encoding != QM_ENCODING_AMPLITUDE || p->request.batch <= 1 || p->n_amps == 0)
        return 0;
    uint64_t *states = calloc((size_t)(mesh->n_ranks > 0 ? mesh->n_ranks : 1), sizeof *states);
    bool *seen = calloc((size_t)(mesh->n_ranks > 0 ? mesh->n_ranks : 1), sizeof *seen);
    double worst = -1;
    if (states && seen) {
        worst = 0;
        for (int i = 0; i < p->n_shards; ++i) {
            const int r = p->shards[i].rank;
            if (r < 0 || r >= mesh->n_ranks || (p->policy == QM_POLICY_REPLICATED && seen[r]))
                continue;
            seen[r] = true;
            states[r] += (p->shards[i].end - p->shards[i].start) / p->n_amps;
            const double t = (double)states[r] * mesh->topo->host_piece_s;
            worst = t > worst ? t : worst;
        }
    }
    free(states);
    free(seen);
    return worst;
}

/* norm_allreduce's host work: every rank merges every state's pieces and computes its
 * coefficient (defaults.host_batch.coefficients per state of the batch); 0 but for an amplitude
 * batch. */
static double host_coeffs_s(const qm_mesh *mesh, const qm_plan *p)
{
    if (p->request.encoding != QM_ENCODING_AMPLITUDE || p->request.batch <= 1)
        return 0;
    return (double)p->request.batch * mesh->topo->host_coeff_s;
}

qm_code qm_cost_estimate(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    qm_code rc = QM_OK;
    link_loads L = {0};
    int *holders = malloc((size_t)mesh->n_devices * sizeof *holders);
    if (!holders)
        return qm_fail(st, QM_E_NOMEM, "cost: out of host memory");
    const double heff = mesh->topo->hbm_efficiency > 0 ? mesh->topo->hbm_efficiency : 1.0;
    for (int k = 0; k < QM_PHASE_COUNT_; ++k) {
        p->estimates_s[k] = 0;
        p->estimate_set[k] = false;
    }
    /* on-device passes over a shard at HBM bandwidth, by encoding: amplitude reads its stash for
     * the norm, then reads and writes it; angle, basis, phase and iqp-z (product states) write
     * once with no norm pass; iqp makes the passes of iqp_passes with no norm pass */
    const qm_encoding enc_kind = p->request.encoding;
    const bool iqp = enc_kind == QM_ENCODING_IQP;
    const double norm_passes = enc_kind == QM_ENCODING_AMPLITUDE ? 1.0 : 0.0;
    const double enc_passes = enc_kind == QM_ENCODING_AMPLITUDE ? 2.0 : iqp ? iqp_passes(p) : 1.0;
    double norm = 0, enc = 0;
    bool hbm_known = true;
    int n_holders = 0;
    for (int d = 0; d < mesh->n_devices; ++d) {
        const qm_plan_device *pd = &p->devices[d];
        if (pd->shard_bytes == 0)
            continue;
        holders[n_holders++] = d;
        double bw = mesh->devices[d].hbm_bw_bytes_per_s * heff;
        if (!(bw > 0)) {
            hbm_known = false;
            continue;
        }
        const double tn = norm_passes * (double)pd->shard_bytes / bw;
        const double te = enc_passes * (double)pd->shard_bytes / bw;
        if (tn > norm)
            norm = tn;
        if (te > enc)
            enc = te;
    }
    /* a batch's per-state host work: its piece sums in local_norm, its merge and coefficients in
     * norm_allreduce */
    const double pieces_s = host_pieces_s(mesh, p);
    if (pieces_s < 0) {
        free(holders);
        return qm_fail(st, QM_E_NOMEM, "cost: out of host memory");
    }
    if (hbm_known) {
        p->estimates_s[QM_PHASE_LOCAL_NORM] = norm + pieces_s;
        p->estimates_s[QM_PHASE_ENCODE] = enc;
        p->estimate_set[QM_PHASE_LOCAL_NORM] = p->estimate_set[QM_PHASE_ENCODE] = true;
    }
    /* norm all-reduce */
    if (p->request.batch > 1 || p->policy == QM_POLICY_REPLICATED || n_holders <= 1 ||
        enc_kind != QM_ENCODING_AMPLITUDE) {
        p->estimates_s[QM_PHASE_NORM_ALLREDUCE] = host_coeffs_s(mesh, p);
        p->estimate_set[QM_PHASE_NORM_ALLREDUCE] = true;
    } else {
        double t = qm_cost_allreduce_s(mesh, holders, n_holders, sizeof(double));
        if (t >= 0) {
            p->estimates_s[QM_PHASE_NORM_ALLREDUCE] = t;
            p->estimate_set[QM_PHASE_NORM_ALLREDUCE] = true;
        }
    }
    /* ingest: host -> each device over its NUMA -> GPU path */
    if ((rc = loads_init(&L, mesh->graph, st)) != QM_OK)
        goto done;
    for (int i = 0; i < n_holders; ++i) {
        const int d = holders[i];
        if (p->devices[d].input_bytes == 0)
            continue;
        qm_topo_path path;
        if ((rc = qm_topo_graph_ingest_path(mesh->graph, mesh->devices[d].node, true, &path, st)) != QM_OK)
            goto done;
        if (!path.found && !p->estimates_note[0])
            no_host_path(mesh, d, "ingest", p->estimates_note,
                         sizeof p->estimates_note);
        loads_add(&L, &path, p->devices[d].input_bytes);
    }
    double t = loads_time(&L, mesh->graph);
    if (t >= 0) {
        p->estimates_s[QM_PHASE_INGEST] = t;
        p->estimate_set[QM_PHASE_INGEST] = true;
    }
    /* iqp cut over devices: the exchanges join the encode phase */
    if (qm_plan_iqp_exchanges(p) > 0 && p->estimate_set[QM_PHASE_ENCODE]) {
        const double tx = iqp_exchange_s(mesh, p, &L, st, &rc);
        if (rc != QM_OK)
            goto done;
        if (tx >= 0)
            p->estimates_s[QM_PHASE_ENCODE] += tx;
        else
            p->estimate_set[QM_PHASE_ENCODE] = false;
    }
    /* gather: every other holder's shard to the target */
    if (p->gather.requested) {
        for (int k = 0; k < 2 * L.n_links; ++k)
            L.bytes[k] = 0;
        L.max_latency = 0;
        L.any = L.broken = false;
        for (int i = 0; i < n_holders && p->policy != QM_POLICY_REPLICATED; ++i) {
            const int d = holders[i];
            if (d == p->gather.device)
                continue;
            qm_topo_path path;
            if ((rc = qm_gather_path(mesh, p, d, &path, st)) != QM_OK)
                goto done;
            loads_add(&L, &path, p->devices[d].shard_bytes);
        }
        t = loads_time(&L, mesh->graph);
        if (t >= 0) {
            p->estimates_s[QM_PHASE_GATHER] = t;
            p->estimate_set[QM_PHASE_GATHER] = true;
        }
    }
    p->has_estimates = true;
done:
    free(L.bytes);
    free(holders);
    return rc;
}

/* ---- the data path: read, staging, write (docs/planner.md "Data path") ------------------------ */

static const char *const io_phase_names[QM_IO_PHASE_COUNT_] = {"read", "staging", "write"};

const char *qm_io_phase_name(qm_io_phase k)
{
    return (int)k >= 0 && k < QM_IO_PHASE_COUNT_ ? io_phase_names[k] : NULL;
}

/* Each device's bytes (in[d]: input values staged onto it; out[d]: state bytes read back from
 * it). */
static void device_bytes(const qm_plan *p, const qm_datapath *dp, uint64_t *in, uint64_t *out)
{
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *s = &p->shards[i];
        in[s->device] += s->input_elems * dp->input_elem_bytes;
        /* replicated: every device holds the whole state; it is read back once, from shard 0 */
        if (p->policy != QM_POLICY_REPLICATED || i == 0)
            out[s->device] += s->bytes;
    }
}

/* The time of every device's bytes[d] over its host path (to the device, or back to the host);
 * negative when a device has no host path (the first such device named in the plan's note). */
static qm_code host_link_s(const qm_mesh *mesh, qm_plan *p, const uint64_t *bytes, bool to_device,
                           link_loads *L, double *out, qm_status *st)
{
    for (int k = 0; k < 2 * L->n_links; ++k)
        L->bytes[k] = 0;
    L->max_latency = 0;
    L->any = L->broken = false;
    for (int d = 0; d < mesh->n_devices; ++d) {
        if (bytes[d] == 0)
            continue;
        qm_topo_path path;
        qm_code rc = qm_topo_graph_ingest_path(mesh->graph, mesh->devices[d].node, to_device, &path, st);
        if (rc != QM_OK)
            return rc;
        if (!path.found && !p->estimates_note[0])
            no_host_path(mesh, d, to_device ? "staging" : "write", p->estimates_note,
                         sizeof p->estimates_note);
        loads_add(L, &path, bytes[d]);
    }
    *out = loads_time(L, mesh->graph);
    return QM_OK;
}

/* Whether shard i takes the fused pass (materialize.c: amplitude, whole states of at most
 * 2^QM_HAL_RED_LOG2_BLOCK slots): sums and amplitudes in one read of each sample, inside the
 * ingest, so local_norm and encode have no pass over it. */
static bool shard_fused(const qm_plan *p, const qm_plan_shard *s)
{
    return p->request.encoding == QM_ENCODING_AMPLITUDE && p->request.qubits <= QM_HAL_RED_LOG2_BLOCK &&
           s->start % p->n_amps == 0 && s->end % p->n_amps == 0 && s->end > s->start;
}

/* The ring pieces of `chunks` chunks of `bytes` input bytes each (ingest.c: a chunk is copied
 * in pieces of at most QM_INGEST_SLOT_BYTES, one per ring slot). */
static double ring_pieces(uint64_t chunks, uint64_t bytes)
{
    return (double)chunks * (double)((bytes + QM_INGEST_SLOT_BYTES - 1) / QM_INGEST_SLOT_BYTES);
}

/* The device side of the data path per device (docs/planner.md "Data path"): chunks[d] the
 * ingest's ring pieces (the overlap's granularity: the reader keeps QM_INGEST_SLOTS - 1 pieces
 * ahead of the copies), launches[d] the ingest's launches (per chunk of QM_STAGING_CHUNK_BYTES
 * of input values, or for a fused shard of whole states of F values + an 8-byte sum: one H2D
 * copy per ring piece, the stash kernel, or amp_batch and the D2H of its sums), fused_s[d] the
 * fused pass's
 * HBM time (the values read, the amplitudes written), norm_l[d] / enc_l[d] the launches of
 * local_norm (per non-fused shard: one sumsq per tree run unless the ingest took the block sums,
 * one tree_combine per tree run but the first) and of encode (per non-fused shard: the amplitude
 * kernel and its drain; a fused shard none: materialize.c makes no stream for it unless a state
 * took the slow path), norm_rt[d] local_norm's round trips (per non-fused shard one: its first
 * run's tree_combine, the copy of its roots, which returns once they are made, and the stream's
 * synchronization, at defaults.piece_roots). */
typedef struct dev_work {
    double *chunks, *launches, *fused_s, *norm_l, *enc_l;
    double *norm_roots, *fused_states; /* local_norm's piece roots, the fused states' sums */
    double *norm_rt;
    bool any_fused, all_fused;
    bool norm_in_ingest; /* every shard's sums are made inside the ingest: fused, or block sums
                            taken from the staging (qm_ingest_sums_in_staging) */
} dev_work;

static void device_work(const qm_mesh *mesh, const qm_plan *p, const qm_datapath *dp, dev_work *w)
{
    const double heff = mesh->topo->hbm_efficiency > 0 ? mesh->topo->hbm_efficiency : 1.0;
    const uint64_t is = dp->input_elem_bytes ? dp->input_elem_bytes : 8;
    const uint64_t chunk_elems = QM_STAGING_CHUNK_BYTES / is;
    uint64_t chunk_states = QM_STAGING_CHUNK_BYTES / (p->request.features * is + 8);
    if (chunk_states == 0)
        chunk_states = 1;
    w->any_fused = false;
    w->all_fused = w->norm_in_ingest = p->n_shards > 0;
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *s = &p->shards[i];
        const int d = s->device;
        if (shard_fused(p, s)) {
            const uint64_t states = (s->end - s->start) / p->n_amps, F = p->request.features;
            const uint64_t full = states / chunk_states, rest = states % chunk_states;
            const double pieces = ring_pieces(full, chunk_states * F * is) +
                                  ring_pieces(rest ? 1 : 0, rest * F * is);
            w->chunks[d] += pieces;
            w->launches[d] += pieces + 2 * (double)(full + (rest ? 1 : 0));
            w->fused_states[d] += (double)states;
            const double bw = mesh->devices[d].hbm_bw_bytes_per_s * heff;
            if (bw > 0)
                w->fused_s[d] += (double)(s->input_elems * is + s->bytes) / bw;
            w->any_fused = true;
            continue;
        }
        w->all_fused = false;
        if (p->request.encoding != QM_ENCODING_AMPLITUDE)
            continue;
        const uint64_t full = s->input_elems / chunk_elems, rest = s->input_elems % chunk_elems;
        const double pieces = ring_pieces(full, chunk_elems * is) + ring_pieces(rest ? 1 : 0, rest * is);
        w->chunks[d] += pieces;
        w->launches[d] += pieces + (double)(full + (rest ? 1 : 0));
        double runs = 0; /* the shard's tree runs */
        for (uint64_t pos = s->start; pos < s->end; runs += 1) {
            const qm_tree_run r = qm_tree_run_next(p->request.qubits, pos, s->end);
            pos = qm_tree_run_end(&r);
        }
        if (qm_ingest_sums_in_staging(p->n_amps, p->request.features, s->start, s->end,
                                      QM_STAGING_CHUNK_BYTES, (size_t)is)) {
            /* a sumsq per chunk over the staged values, inside the ingest, and behind the last
             * chunk the runs' tree_combines and the copy of the roots (ingest.c): launches
             * enqueued while the device still copies and sums, the copy's synchronization a
             * launch round trip after its last kernel */
            w->launches[d] += (double)(full + (rest ? 1 : 0)) + runs + 1;
            const double bw = mesh->devices[d].hbm_bw_bytes_per_s * heff;
            if (bw > 0)
                w->fused_s[d] += (double)(s->input_elems * is) / bw;
        } else {
            w->norm_in_ingest = false;
            w->norm_l[d] += 2 * runs - 1; /* a sumsq per run, the other runs' tree_combines */
            w->norm_rt[d] += 1; /* the first tree_combine, the D2H of the roots, the sync */
        }
        w->norm_roots[d] += (double)qm_tree_range_pieces(p->request.qubits, s->start, s->end);
        w->enc_l[d] += 2;
    }
}

static double max_over(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; ++i)
        if (v[i] > m)
            m = v[i];
    return m;
}

/* Device phase k on devices: every shard fused (its pass made inside the ingest) drops the
 * bandwidth term, keeping the phase's host work `host_s`; then the most launches of any device
 * (count[d]) x defaults.launch. */
static void add_launches(qm_plan *p, qm_phase k, const double *count, double launch,
                         bool all_fused, double host_s, double *tmp, int D)
{
    if (!p->estimate_set[k])
        return;
    if (all_fused)
        p->estimates_s[k] = host_s;
    for (int d = 0; d < D; ++d)
        tmp[d] = count[d] * launch;
    p->estimates_s[k] += max_over(tmp, D);
}

/* per_dev summed over rank r's devices. */
static double rank_sum(const qm_mesh *mesh, const double *per_dev, int r)
{
    double sum = 0;
    for (int d = mesh->rank_first[r]; d < mesh->rank_first[r + 1]; ++d)
        sum += per_dev[d];
    return sum;
}

/* The most, over ranks, of per_dev summed over the rank's devices (work its thread does one
 * device after another). */
static double rank_max_sum(const qm_mesh *mesh, const double *per_dev)
{
    double worst = 0;
    for (int r = 0; r < mesh->n_ranks; ++r) {
        const double sum = rank_sum(mesh, per_dev, r);
        worst = sum > worst ? sum : worst;
    }
    return worst;
}

/* Making and freeing a page-locked buffer of `bytes` (the CUDA backend rounds it up to 2 MiB
 * pages and registers it; every phase frees what it made): defaults.page_lock's buffer + bytes /
 * rate; 0 for no bytes. */
static double page_lock_s(const qm_topology *t, double bytes)
{
    const double page = (double)((uint64_t)2 << 20);
    return bytes > 0 ? t->page_lock_s + ceil(bytes / page) * page / t->page_lock_bw_bytes_per_s : 0;
}

/* Two stages overlapped chunk by chunk (a reader and the copies, or the copies and the writers):
 * the slower stage's time plus one chunk of the faster one (the first chunk is read before its
 * copy can start, or the last one copied after its read ends). */
static double overlapped(double a, double b, double chunks)
{
    const double hi = a > b ? a : b, lo = a > b ? b : a;
    return hi + (chunks >= 1 ? lo / chunks : lo);
}

qm_code qm_cost_datapath(const qm_mesh *mesh, qm_plan *p, const qm_datapath *dp, qm_status *st)
{
    p->datapath = *dp;
    for (int k = 0; k < QM_IO_PHASE_COUNT_; ++k) {
        p->io_s[k] = 0;
        p->io_set[k] = false;
    }
    if (!p->has_estimates || p->n_shards == 0 || (!dp->input && dp->output == QM_DP_OUTPUT_NONE))
        return QM_OK;
    const qm_topology *t = mesh->topo;
    const int D = mesh->n_devices;
    const double launch = dp->sim ? 0.0 : t->launch_s; /* the simulator's kernels are calls */
    const double roots = dp->sim ? 0.0 : t->piece_roots_s;
    qm_code rc = QM_OK;
    link_loads L = {0};
    uint64_t *in = calloc((size_t)D * 2, sizeof *in);
    double *host = calloc((size_t)(t->n_hosts > 0 ? t->n_hosts : 1), sizeof *host);
    double *work = calloc((size_t)D * 9, sizeof *work);
    if (!in || !host || !work) {
        rc = qm_fail(st, QM_E_NOMEM, "cost: out of host memory");
        goto done;
    }
    uint64_t *out = in + D;
    double *tmp = work + 5 * D;
    dev_work w = {work,         work + D,     work + 2 * D, work + 3 * D, work + 4 * D,
                  work + 6 * D, work + 7 * D, work + 8 * D, false,        false,
                  false};
    device_bytes(p, dp, in, out);
    device_work(mesh, p, dp, &w);
    if ((rc = loads_init(&L, mesh->graph, st)) != QM_OK)
        goto done;
    /* the device phases on devices: their launches at defaults.launch, local_norm's round trip
     * per stashed shard at defaults.piece_roots; a fused shard's sums and amplitudes are made
     * inside the ingest (its HBM pass is charged there) */
    if (!dp->sim && p->request.encoding == QM_ENCODING_AMPLITUDE) {
        const double pieces_s = host_pieces_s(mesh, p);
        if (pieces_s < 0) {
            rc = qm_fail(st, QM_E_NOMEM, "cost: out of host memory");
            goto done;
        }
        add_launches(p, QM_PHASE_LOCAL_NORM, w.norm_l, launch, w.norm_in_ingest, pieces_s, tmp, D);
        add_launches(p, QM_PHASE_ENCODE, w.enc_l, launch, w.all_fused, 0, tmp, D);
        /* local_norm's round trips: each stashed shard's roots are copied into plain memory,
         * which returns once they are made, so a rank's thread waits for its shards one after
         * another (materialize.c sum_shards) */
        if (p->estimate_set[QM_PHASE_LOCAL_NORM])
            p->estimates_s[QM_PHASE_LOCAL_NORM] += rank_max_sum(mesh, w.norm_rt) * roots;
    }
    double rd, wr;
    if (dp->input) {
        /* read: the bytes each host's ranks read (CSV: every rank reads the whole text), the
         * resident fraction at the host's cached_read, the rest at its storage read rate */
        if (dp->input_file_bytes) {
            for (int r = 0; r < mesh->n_ranks; ++r)
                if (mesh->rank_first[r + 1] > mesh->rank_first[r])
                    host[mesh->devices[mesh->rank_first[r]].host] += (double)dp->input_file_bytes;
        } else {
            for (int d = 0; d < D; ++d)
                host[mesh->devices[d].host] += (double)in[d];
        }
        const double f = dp->input_resident > 0 ? (dp->input_resident < 1 ? dp->input_resident : 1) : 0;
        double read = 0, staged = 0, ingest = 0;
        for (int h = 0; h < t->n_hosts; ++h) {
            qm_host_storage_bw(t, h, &rd, &wr);
            const double th = host[h] * f / qm_host_cached_read_bw(t, h) + host[h] * (1 - f) / rd;
            if (th > read)
                read = th;
            host[h] = 0;
        }
        p->io_s[QM_IO_READ] = read;
        p->io_set[QM_IO_READ] = true;
        if (dp->sim) {
            /* the simulator copies in host memory after the read, one thread per process (a
             * host's bytes at defaults.host_copy) */
            for (int d = 0; d < D; ++d)
                host[mesh->devices[d].host] += (double)in[d];
            for (int h = 0; h < t->n_hosts; ++h)
                if (host[h] / t->host_copy_bw_bytes_per_s > staged)
                    staged = host[h] / t->host_copy_bw_bytes_per_s;
            ingest = read + staged;
            p->io_set[QM_IO_STAGING] = true;
        } else {
            /* devices: the copies (the link model: every device's input over its host path, at
             * the links' rates, which topo dump measures as pinned H2D on a CUDA machine) plus
             * each device's launches and fused HBM pass, overlapped with the read piece by ring
             * piece; staging = ingest - read, which is what encode measures (ingest less the span
             * of the background reads) */
            double link;
            if ((rc = host_link_s(mesh, p, in, true, &L, &link, st)) != QM_OK)
                goto done;
            if (link >= 0) {
                for (int d = 0; d < D; ++d)
                    tmp[d] = w.launches[d] * launch + w.fused_s[d];
                const double copies = link + max_over(tmp, D);
                /* staging_setup holds a QM_STATE_ALLOC_FIRST_BYTES state's first allocation:
                 * each larger shard's state adds its further bytes at defaults.state_alloc
                 * (per device here, summed per rank below) */
                for (int d = 0; d < D; ++d)
                    tmp[d] = 0;
                for (int i = 0; i < p->n_shards; ++i)
                    if (p->shards[i].bytes > QM_STATE_ALLOC_FIRST_BYTES)
                        tmp[p->shards[i].device] +=
                            (double)(p->shards[i].bytes - QM_STATE_ALLOC_FIRST_BYTES) /
                            t->state_alloc_bw_bytes_per_s;
                /* outside the reads' span, which the measured staging holds: before the first
                 * read each of a rank's devices' state and block sums allocated, after the last
                 * its staging pipe closed (defaults.staging_setup, and a state beyond its first
                 * GiB at defaults.state_alloc; the rank's thread does them one device after
                 * another); with several ranks also each rank's page-locked ring
                 * (QM_INGEST_SLOTS slots of QM_INGEST_SLOT_BYTES, fewer for fewer pieces) and its
                 * fused states' sums. One process page-locks them on its CUDA start-up thread
                 * while it opens the backend (hal/cuda/cuda.c: outside the ingest), and a context
                 * keeps them: not charged. Inside the span: the pipes opened and first used
                 * (defaults.staging_open, one device after another), after the first reads were
                 * submitted (ingest.c) and before the first copy */
                const bool lock_here = mesh->n_ranks > 1;
                double setup = 0, open = 0;
                for (int r = 0; r < mesh->n_ranks; ++r) {
                    double pieces = 0, fused = 0, pipes = 0;
                    for (int d = mesh->rank_first[r]; d < mesh->rank_first[r + 1]; ++d) {
                        pieces += w.chunks[d];
                        fused += w.fused_states[d];
                        pipes += w.chunks[d] > 0;
                    }
                    const double slots = pieces < QM_INGEST_SLOTS ? pieces : QM_INGEST_SLOTS;
                    /* and the buffer of every stashed shard's piece roots, made before the
                     * reads (materialize.c roots_prepare): page-locked when larger than
                     * QM_BLOCK_SUMS_PAGEABLE_MAX (plan.h) */
                    const double rb = rank_sum(mesh, w.norm_roots, r) * 8.0;
                    double s = pipes * t->staging_setup_s + rank_sum(mesh, tmp, r) +
                               (rb <= (double)QM_BLOCK_SUMS_PAGEABLE_MAX ? 0 : page_lock_s(t, rb));
                    if (lock_here)
                        s += page_lock_s(t, slots * (double)QM_INGEST_SLOT_BYTES) +
                             page_lock_s(t, fused * 8.0);
                    setup = s > setup ? s : setup;
                    open = pipes * t->staging_open_s > open ? pipes * t->staging_open_s : open;
                }
                const double pieces = max_over(w.chunks, D); /* ring pieces */
                const double first = pieces >= 1 ? read / pieces : read;
                if (dp->input_background) {
                    /* the copies start once the pipes are open and the first piece is read; the
                     * reader's threads fill the ring's slots side by side, so when the read is
                     * the slower side the last `depth` pieces' reads end together and their
                     * copies follow them (measured on an H100, whose copies outrun its
                     * page-cache reads: 1.0-1.5 ms after the last read of a 2^28 state, 8 pieces
                     * at the H2D rate) */
                    const double depth = pieces < QM_INGEST_SLOTS ? pieces : QM_INGEST_SLOTS;
                    const double tail = pieces >= 1 ? copies * depth / pieces : copies;
                    const double start = open > first ? open : first;
                    ingest = setup + (read + tail > start + copies ? read + tail : start + copies);
                    /* read as encode measures it (the span of the background reads: from the
                     * first submit to the last wait, which comes after the pipes are open): the
                     * reader runs at most SLOTS - 1 pieces ahead of the copies, so when the
                     * copies are slower the last read starts only after the copies of all but
                     * the last SLOTS pieces */
                    double held = open;
                    if (pieces > QM_INGEST_SLOTS)
                        held = start + copies * (pieces - QM_INGEST_SLOTS) / pieces + first;
                    if (held > read) {
                        read = held;
                        p->io_s[QM_IO_READ] = read;
                    }
                } else {
                    /* a reader on the ingest's thread (CSV, HDF5) reads each piece once the pipes
                     * are open and its slot is free, while the copies of the pieces before it
                     * run: the slower side + one piece of the faster; encode measures the reads'
                     * own seconds */
                    ingest = setup + open + overlapped(read, copies, pieces);
                }
                staged = ingest - read;
                p->io_set[QM_IO_STAGING] = true;
            }
        }
        p->io_s[QM_IO_STAGING] = staged;
        if (p->io_set[QM_IO_STAGING] && p->estimate_set[QM_PHASE_INGEST])
            p->estimates_s[QM_PHASE_INGEST] = ingest;
        else
            p->estimate_set[QM_PHASE_INGEST] = false;
    }
    if (dp->output != QM_DP_OUTPUT_NONE) {
        /* the read-back: on devices each shard over its path to the host in chunks of
         * QM_READBACK_AMPS / 8 amplitudes (one D2H and its synchronization each) into
         * page-locked staging, overlapped with the writer threads' pwrite of the chunks before;
         * the simulator's shards are host memory, written where they lie (no copy) */
        double back = 0;
        if (!dp->sim && (rc = host_link_s(mesh, p, out, false, &L, &back, st)) != QM_OK)
            goto done;
        const double chunk_bytes = (double)(QM_READBACK_AMPS / 8 * qm_dtype_size(p->request.dtype));
        double rb_chunks = 0, file = 0;
        for (int d = 0; d < D; ++d)
            if (out[d] && (double)out[d] / chunk_bytes > rb_chunks)
                rb_chunks = ceil((double)out[d] / chunk_bytes);
        /* the commit (rank 0's) removes what the output replaces (an earlier output at its
         * path) at rank 0's host's storage.remove */
        const int h0 = mesh->devices[mesh->rank_first[0]].host;
        const double removal = (double)dp->output_replaced_bytes / qm_host_remove_bw(t, h0);
        if (dp->output == QM_DP_OUTPUT_FILE) { /* rank 0's host writes the gathered file */
            qm_host_storage_bw(t, h0, &rd, &wr);
            file = (double)dp->output_bytes / wr;
            double all = 0;
            for (int d = 0; d < D; ++d)
                all += (double)out[d];
            rb_chunks = ceil(all / chunk_bytes);
        } else { /* each host writes its ranks' shard files */
            for (int h = 0; h < t->n_hosts; ++h)
                host[h] = 0;
            for (int d = 0; d < D; ++d)
                host[mesh->devices[d].host] += (double)out[d];
            for (int h = 0; h < t->n_hosts; ++h) {
                qm_host_storage_bw(t, h, &rd, &wr);
                if (host[h] / wr > file)
                    file = host[h] / wr;
            }
        }
        if (back >= 0) {
            /* on devices: first the staging, one page-locked block of the read-back chunk's
             * bytes (encode.c staging_open), made by each rank that writes; one process
             * page-locks it on its CUDA start-up thread with the ingest's ring (encode.c
             * prepare_staging): not charged here */
            const double setup =
                dp->sim || mesh->n_ranks <= 1
                    ? 0
                    : page_lock_s(t, (double)QM_READBACK_AMPS * qm_dtype_size(p->request.dtype));
            const double copies = dp->sim ? 0 : back + 2 * rb_chunks * launch;
            p->io_s[QM_IO_WRITE] = setup + overlapped(copies, file, rb_chunks) + removal;
            p->io_set[QM_IO_WRITE] = true;
        }
    }
done:
    free(L.bytes);
    free(in);
    free(host);
    free(work);
    return rc;
}
