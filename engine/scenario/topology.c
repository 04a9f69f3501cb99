/* topology.c — the topology stage: graph, paths, device matrix, gather device and device order.
 *
 * In: a qm_topology (retained by the graph). Out: paths on demand, device matrices, renderings.
 * Must not: allocate device memory, know about plans or ranks, or hand out positions in some other
 * ordering where a node index is meant (a gather device or an order is always node indices, also
 * after devices were reordered by affinity; docs/topology.md).
 *
 * How paths are found: the criteria (worst class, bottleneck bandwidth, hops) are not isotone — the
 * best path to an intermediate node is not always the prefix of the best path beyond it (a
 * nvlink/10 GB/s prefix loses to a pcie/100 GB/s one once a pcie link follows; a 3-hop prefix loses
 * to a 1-hop one with less bandwidth once a slower link follows). So one source's search is a
 * multi-criteria label-setting search (Martins): labels (class, bw, hops) are popped in
 * lexicographic order (class, -bw, hops, node, predecessor node, creation), a popped label that a
 * permanent label at its node weakly dominates is dropped, the others become permanent and are
 * extended. Every criterion only gets worse along a path, so the first permanent label at a node is
 * its best path, and the others keep the Pareto front that later nodes may need. Labels that revisit
 * a node are dominated, so the search ends; a step bound turns pathological graphs into an error.
 * GPUs are never extended through (they are endpoints, as in NCCL without NVLink relaying).
 * The last source's search is cached; a matrix asks row by row, one search per row.
 * Known wart: a link whose a->b bandwidth is 0 is treated as having no a->b direction.
 */
#include "topology.h"
#include "status_internal.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct topo_edge {
    int to;
    int link;
    bool a_to_b;
    qm_link_class cls;
    double bw;        /* effective, bytes/s */
    double latency_s;
} topo_edge;

typedef struct topo_label {
    int node;
    int pred;         /* label index; -1 for the source */
    int edge;         /* index into g->out; -1 for the source */
    int hops;
    qm_link_class cls;
    double bw;
    double latency_s;
    int next_perm;    /* next permanent label at the same node, -1 at the end */
} topo_label;

struct qm_topo_graph {
    const qm_topology *topo;
    int n_nodes;
    int n_links;           /* topology links, then implicit NIC attach links */
    qm_link *links;        /* copy of both */
    double *bw_ab, *bw_ba; /* effective */
    double *latency_s;
    int *out_start;        /* n_nodes + 1 */
    topo_edge *out;        /* edges leaving node v: out[out_start[v] .. out_start[v+1]) */
    /* search state of the cached source */
    int cached_src;        /* -1: none */
    topo_label *labels;
    int n_labels, cap_labels, max_labels;
    int *heap;
    int n_heap, cap_heap;
    int *best;             /* per node: first permanent label, -1 when unreached */
    int *perm;             /* per node: head of its permanent labels */
    int *touched;          /* nodes whose best/perm were set by the cached search */
    int n_touched;
    bool search_done;      /* the cached source's search ran until its heap was empty */
    /* for the uniform-hub check (qm_topo_graph_uniform) */
    int *in_start;         /* n_nodes + 1 */
    topo_edge *in;         /* edges entering node v, `to` = where they come from */
    int *mark;             /* per node: the generation that last marked it */
    int mark_gen;
};

static const char *const class_names[QM_LINK_CLASS_COUNT_] = {"nvlink", "c2c", "pcie", "sys", "net"};
static const char *const kind_names[] = {"gpu", "numa", "pcie_switch", "nvswitch", "nic",
                                         "fabric_switch"};
#define KIND_COUNT ((int)(sizeof kind_names / sizeof kind_names[0]))

const char *qm_topo_class_name(qm_link_class cls)
{
    return (int)cls >= 0 && cls < QM_LINK_CLASS_COUNT_ ? class_names[cls] : NULL;
}

const char *qm_topo_node_kind_name(qm_node_kind kind)
{
    return (int)kind >= 0 && (int)kind < KIND_COUNT ? kind_names[kind] : NULL;
}

/* ---- creation -------------------------------------------------------------------------------- */

static qm_code check_topology(const qm_topology *t, qm_status *st)
{
    if (t->n_nodes < 0 || t->n_links < 0 || (t->n_nodes > 0 && !t->nodes) ||
        (t->n_links > 0 && !t->links))
        return qm_fail(st, QM_E_ARG, "topology: node or link arrays are missing (%d nodes, %d links)",
                       t->n_nodes, t->n_links);
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
        if (!(t->efficiency[c] > 0 && t->efficiency[c] <= 1))
            return qm_fail(st, QM_E_RANGE,
                           "topology: efficiency of class %s must be in (0, 1] (got %g); set "
                           "defaults.efficiency.%s",
                           class_names[c], t->efficiency[c], class_names[c]);
        if (!(t->latency_s[c] >= 0) || isinf(t->latency_s[c]))
            return qm_fail(st, QM_E_RANGE,
                           "topology: default latency of class %s must be finite and >= 0 (got %g s)",
                           class_names[c], t->latency_s[c]);
    }
    if (!(t->hbm_efficiency > 0 && t->hbm_efficiency <= 1))
        return qm_fail(st, QM_E_RANGE,
                       "topology: hbm efficiency must be in (0, 1] (got %g); set defaults.efficiency.hbm",
                       t->hbm_efficiency);
    if (!(t->host_link_bw_bytes_per_s >= 0) || isinf(t->host_link_bw_bytes_per_s))
        return qm_fail(st, QM_E_RANGE,
                       "topology: the implicit host link bandwidth must be finite and >= 0 (got %g "
                       "B/s); set defaults.host_link", t->host_link_bw_bytes_per_s);
    for (int i = 0; i < t->n_nodes; ++i) {
        const qm_node *n = &t->nodes[i];
        if ((int)n->kind < 0 || (int)n->kind >= KIND_COUNT)
            return qm_fail(st, QM_E_ARG, "topology: node %d (%.64s) has an unknown kind (%d)", i,
                           n->id, (int)n->kind);
        if (n->numa < -1 || n->numa >= t->n_nodes || n->attach < -1 || n->attach >= t->n_nodes)
            return qm_fail(st, QM_E_ARG,
                           "topology: node %d (%.64s) refers to a node out of range (numa %d, attach "
                           "%d, %d nodes)",
                           i, n->id, n->numa, n->attach, t->n_nodes);
        if (!(n->nic_bw_bytes_per_s >= 0) || isinf(n->nic_bw_bytes_per_s) ||
            !(n->hbm_bw_bytes_per_s >= 0) || isinf(n->hbm_bw_bytes_per_s))
            return qm_fail(st, QM_E_RANGE,
                           "topology: node %d (%.64s) has a bad bandwidth (nic %g, hbm %g B/s)", i,
                           n->id, n->nic_bw_bytes_per_s, n->hbm_bw_bytes_per_s);
    }
    for (int i = 0; i < t->n_links; ++i) {
        const qm_link *l = &t->links[i];
        if (l->a < 0 || l->a >= t->n_nodes || l->b < 0 || l->b >= t->n_nodes || l->a == l->b)
            return qm_fail(st, QM_E_ARG,
                           "topology: link %d joins nodes %d and %d, which must be distinct nodes "
                           "below %d",
                           i, l->a, l->b, t->n_nodes);
        if ((int)l->cls < 0 || l->cls >= QM_LINK_CLASS_COUNT_)
            return qm_fail(st, QM_E_ARG, "topology: link %d has an unknown class (%d)", i,
                           (int)l->cls);
        if (!(l->bw_ab_bytes_per_s >= 0) || isinf(l->bw_ab_bytes_per_s) ||
            !(l->bw_ba_bytes_per_s >= 0) || isinf(l->bw_ba_bytes_per_s))
            return qm_fail(st, QM_E_RANGE,
                           "topology: link %d (%.64s - %.64s) has a bad bandwidth (a->b %g, b->a %g "
                           "B/s); bandwidths must be finite and >= 0",
                           i, t->nodes[l->a].id, t->nodes[l->b].id, l->bw_ab_bytes_per_s,
                           l->bw_ba_bytes_per_s);
        if (isnan(l->latency_s) || isinf(l->latency_s))
            return qm_fail(st, QM_E_RANGE, "topology: link %d (%.64s - %.64s) has a bad latency (%g s)",
                           i, t->nodes[l->a].id, t->nodes[l->b].id, l->latency_s);
    }
    return QM_OK;
}

qm_code qm_topo_graph_create(const qm_topology *topo, qm_topo_graph **out, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_topo_graph *g = NULL;
    int *implicit = NULL;
    if (out)
        *out = NULL;
    if (!topo || !out)
        return qm_fail(st, QM_E_ARG, "topology: topology and out must not be NULL");
    if ((rc = check_topology(topo, st)) != QM_OK)
        return rc;

    implicit = malloc((size_t)(topo->n_nodes ? topo->n_nodes : 1) * sizeof *implicit);
    if (!implicit)
        goto nomem;
    const int n_implicit = qm_topology_implicit_links(topo, implicit);
    if (topo->n_links > INT_MAX / 4 - n_implicit || topo->n_nodes > INT_MAX / 4) {
        free(implicit);
        return qm_fail(st, QM_E_ARG, "topology: too large (%d nodes, %d links)", topo->n_nodes,
                       topo->n_links);
    }

    g = calloc(1, sizeof *g);
    if (!g)
        goto nomem;
    g->topo = topo;
    g->n_nodes = topo->n_nodes;
    g->n_links = topo->n_links + n_implicit;
    g->cached_src = -1;
    size_t nl = (size_t)g->n_links, nn = (size_t)g->n_nodes;
    g->links = calloc(nl ? nl : 1, sizeof *g->links);
    g->bw_ab = calloc(nl ? nl : 1, sizeof *g->bw_ab);
    g->bw_ba = calloc(nl ? nl : 1, sizeof *g->bw_ba);
    g->latency_s = calloc(nl ? nl : 1, sizeof *g->latency_s);
    g->out_start = calloc(nn + 1, sizeof *g->out_start);
    g->out = calloc(nl ? 2 * nl : 1, sizeof *g->out);
    g->best = calloc(nn ? nn : 1, sizeof *g->best);
    g->perm = calloc(nn ? nn : 1, sizeof *g->perm);
    g->touched = calloc(nn ? nn : 1, sizeof *g->touched);
    g->in_start = calloc(nn + 1, sizeof *g->in_start);
    g->in = calloc(nl ? 2 * nl : 1, sizeof *g->in);
    g->mark = calloc(nn ? nn : 1, sizeof *g->mark);
    if (!g->links || !g->bw_ab || !g->bw_ba || !g->latency_s || !g->out_start || !g->out ||
        !g->best || !g->perm || !g->touched || !g->in_start || !g->in || !g->mark)
        goto nomem;
    for (size_t v = 0; v < nn; ++v)
        g->best[v] = g->perm[v] = -1;

    if (topo->n_links > 0)
        memcpy(g->links, topo->links, (size_t)topo->n_links * sizeof *g->links);
    for (int i = 0, k = topo->n_links; i < topo->n_nodes; ++i) {
        int target = implicit[i];
        if (target < 0)
            continue;
        const double bw = qm_topology_implicit_bw(topo, i);
        g->links[k] = (qm_link){.a = i, .b = target, .cls = QM_LINK_PCIE,
                                .bw_ab_bytes_per_s = bw, .bw_ba_bytes_per_s = bw,
                                .latency_s = -1, .fabric = -1, .loc = topo->nodes[i].loc};
        ++k;
    }
    for (int i = 0; i < g->n_links; ++i) {
        const qm_link *l = &g->links[i];
        double eff = topo->efficiency[l->cls];
        g->bw_ab[i] = l->bw_ab_bytes_per_s * eff;
        g->bw_ba[i] = l->bw_ba_bytes_per_s * eff;
        g->latency_s[i] = l->latency_s >= 0 ? l->latency_s : topo->latency_s[l->cls];
        if (g->bw_ab[i] > 0)
            g->out_start[l->a + 1]++;
        if (g->bw_ba[i] > 0)
            g->out_start[l->b + 1]++;
    }
    for (int v = 0; v < g->n_nodes; ++v)
        g->out_start[v + 1] += g->out_start[v];
    {
        int *fill = calloc(nn ? nn : 1, sizeof *fill);
        if (!fill)
            goto nomem;
        for (int i = 0; i < g->n_links; ++i) {
            const qm_link *l = &g->links[i];
            if (g->bw_ab[i] > 0)
                g->out[g->out_start[l->a] + fill[l->a]++] =
                    (topo_edge){.to = l->b, .link = i, .a_to_b = true, .cls = l->cls,
                                .bw = g->bw_ab[i], .latency_s = g->latency_s[i]};
            if (g->bw_ba[i] > 0)
                g->out[g->out_start[l->b] + fill[l->b]++] =
                    (topo_edge){.to = l->a, .link = i, .a_to_b = false, .cls = l->cls,
                                .bw = g->bw_ba[i], .latency_s = g->latency_s[i]};
        }
        /* the same edges by the node they enter */
        for (int e = 0; e < g->out_start[g->n_nodes]; ++e)
            g->in_start[g->out[e].to + 1]++;
        for (int v = 0; v < g->n_nodes; ++v)
            g->in_start[v + 1] += g->in_start[v];
        memset(fill, 0, nn * sizeof *fill);
        for (int v = 0; v < g->n_nodes; ++v)
            for (int e = g->out_start[v]; e < g->out_start[v + 1]; ++e) {
                topo_edge ed = g->out[e];
                int to = ed.to;
                ed.to = v;
                g->in[g->in_start[to] + fill[to]++] = ed;
            }
        free(fill);
    }
    /* Step bound: generous for real topologies (a few labels per node), finite for any. */
    {
        long long bound = 64LL * ((long long)g->n_nodes + g->out_start[g->n_nodes]) + 1024;
        g->max_labels = bound > INT_MAX / 2 ? INT_MAX / 2 : (int)bound;
    }
    free(implicit);
    *out = g;
    return QM_OK;

nomem:
    free(implicit);
    qm_topo_graph_destroy(g);
    return qm_fail(st, QM_E_NOMEM, "topology: out of host memory building the graph (%d nodes, %d links)",
                   topo->n_nodes, topo->n_links);
}

void qm_topo_graph_destroy(qm_topo_graph *g)
{
    if (!g)
        return;
    free(g->links);
    free(g->bw_ab);
    free(g->bw_ba);
    free(g->latency_s);
    free(g->out_start);
    free(g->out);
    free(g->labels);
    free(g->heap);
    free(g->best);
    free(g->perm);
    free(g->touched);
    free(g->in_start);
    free(g->in);
    free(g->mark);
    free(g);
}

/* ---- getters --------------------------------------------------------------------------------- */

const qm_topology *qm_topo_graph_topology(const qm_topo_graph *g)
{
    return g ? g->topo : NULL;
}

int qm_topo_graph_node_count(const qm_topo_graph *g)
{
    return g ? g->n_nodes : 0;
}

const char *qm_topo_graph_node_id(const qm_topo_graph *g, int node)
{
    return g && node >= 0 && node < g->n_nodes ? g->topo->nodes[node].id : "";
}

int qm_topo_graph_link_count(const qm_topo_graph *g)
{
    return g ? g->n_links : 0;
}

const qm_link *qm_topo_graph_link(const qm_topo_graph *g, int link)
{
    return g && link >= 0 && link < g->n_links ? &g->links[link] : NULL;
}

double qm_topo_graph_link_bw(const qm_topo_graph *g, int link, bool a_to_b)
{
    if (!g || link < 0 || link >= g->n_links)
        return 0;
    return a_to_b ? g->bw_ab[link] : g->bw_ba[link];
}

double qm_topo_graph_link_latency(const qm_topo_graph *g, int link)
{
    return g && link >= 0 && link < g->n_links ? g->latency_s[link] : 0;
}

qm_code qm_topo_graph_find(const qm_topo_graph *g, const char *id, int *out_node, qm_status *st)
{
    if (!g || !id || !out_node)
        return qm_fail(st, QM_E_ARG, "topology: graph, id and out_node must not be NULL");
    *out_node = -1;
    for (int i = 0; i < g->n_nodes; ++i)
        if (strcmp(g->topo->nodes[i].id, id) == 0) {
            *out_node = i;
            return QM_OK;
        }
    return qm_fail(st, QM_E_UNKNOWN_REF, "topology: no node has the id '%.64s' (%d nodes)", id,
                   g->n_nodes);
}

/* ---- the search ------------------------------------------------------------------------------ */

static int pred_node(const qm_topo_graph *g, int label)
{
    int p = g->labels[label].pred;
    return p < 0 ? -1 : g->labels[p].node;
}

/* Whether label x comes before label y: (class, -bw, hops, node, predecessor node, creation). */
static bool label_before(const qm_topo_graph *g, int x, int y)
{
    const topo_label *a = &g->labels[x], *b = &g->labels[y];
    if (a->cls != b->cls)
        return a->cls < b->cls;
    if (a->bw != b->bw)
        return a->bw > b->bw;
    if (a->hops != b->hops)
        return a->hops < b->hops;
    if (a->node != b->node)
        return a->node < b->node;
    int pa = pred_node(g, x), pb = pred_node(g, y);
    if (pa != pb)
        return pa < pb;
    return x < y;
}

static void heap_push(qm_topo_graph *g, int label)
{
    int i = g->n_heap++;
    g->heap[i] = label;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!label_before(g, g->heap[i], g->heap[parent]))
            break;
        int tmp = g->heap[i];
        g->heap[i] = g->heap[parent];
        g->heap[parent] = tmp;
        i = parent;
    }
}

static int heap_pop(qm_topo_graph *g)
{
    int top = g->heap[0];
    g->heap[0] = g->heap[--g->n_heap];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < g->n_heap && label_before(g, g->heap[l], g->heap[m]))
            m = l;
        if (r < g->n_heap && label_before(g, g->heap[r], g->heap[m]))
            m = r;
        if (m == i)
            break;
        int tmp = g->heap[i];
        g->heap[i] = g->heap[m];
        g->heap[m] = tmp;
        i = m;
    }
    return top;
}

/* Whether a permanent label at `node` is at least as good in every criterion. */
static bool dominated(const qm_topo_graph *g, int node, qm_link_class cls, double bw, int hops)
{
    for (int p = g->perm[node]; p >= 0; p = g->labels[p].next_perm) {
        const topo_label *q = &g->labels[p];
        if (q->cls <= cls && q->bw >= bw && q->hops <= hops)
            return true;
    }
    return false;
}

/* Room for one more label (and its heap slot). */
static qm_code reserve_label(qm_topo_graph *g, int src, qm_status *st)
{
    if (g->n_labels >= g->max_labels)
        return qm_fail(st, QM_E_UNSUPPORTED,
                       "topology: path search from %.64s exceeded its bound (%d labels for %d nodes)",
                       g->topo->nodes[src].id, g->max_labels, g->n_nodes);
    if (g->n_labels == g->cap_labels) {
        int cap = g->cap_labels ? g->cap_labels * 2 : 256;
        if (cap > g->max_labels)
            cap = g->max_labels;
        topo_label *labels = realloc(g->labels, (size_t)cap * sizeof *labels);
        if (!labels)
            goto nomem;
        g->labels = labels;
        g->cap_labels = cap;
    }
    if (g->n_heap == g->cap_heap) {
        int cap = g->cap_heap ? g->cap_heap * 2 : 256;
        int *heap = realloc(g->heap, (size_t)cap * sizeof *heap);
        if (!heap)
            goto nomem;
        g->heap = heap;
        g->cap_heap = cap;
    }
    return QM_OK;
nomem:
    return qm_fail(st, QM_E_NOMEM, "topology: out of host memory searching paths from %.64s (%d labels)",
                   g->topo->nodes[src].id, g->n_labels);
}

/* One source's search, run until `dst` (-1: every node) has its best label; it resumes where it
 * stopped when the next query has the same source. Labels are popped in the order of the path
 * rule (class, -bandwidth, hops), so the first permanent label of a node is its best path and the
 * search can stop there: a query inside a host never expands the rest of a large cluster.
 * Leaves best[] and the labels for fill_path. */
static qm_code search(qm_topo_graph *g, int src, int dst, qm_status *st)
{
    qm_code rc;
    if (g->cached_src != src) {
        for (int i = 0; i < g->n_touched; ++i)
            g->best[g->touched[i]] = g->perm[g->touched[i]] = -1;
        g->n_touched = 0;
        g->n_labels = 0;
        g->n_heap = 0;
        g->search_done = false;
        if ((rc = reserve_label(g, src, st)) != QM_OK)
            return rc;
        g->labels[0] = (topo_label){.node = src, .pred = -1, .edge = -1, .hops = 0,
                                    .cls = QM_LINK_NVLINK, .bw = INFINITY, .latency_s = 0,
                                    .next_perm = -1};
        g->n_labels = 1;
        heap_push(g, 0);
        g->cached_src = src;
    }
    if (g->search_done || (dst >= 0 && g->best[dst] >= 0))
        return QM_OK;
    while (g->n_heap > 0) {
        int li = heap_pop(g);
        topo_label lab = g->labels[li];
        if (dominated(g, lab.node, lab.cls, lab.bw, lab.hops))
            continue;
        if (g->perm[lab.node] < 0)
            g->touched[g->n_touched++] = lab.node;
        g->labels[li].next_perm = g->perm[lab.node];
        g->perm[lab.node] = li;
        if (g->best[lab.node] < 0)
            g->best[lab.node] = li;
        if (lab.node == src || g->topo->nodes[lab.node].kind != QM_NODE_GPU) {
            /* GPUs are endpoints, never transit */
            for (int e = g->out_start[lab.node]; e < g->out_start[lab.node + 1]; ++e) {
                const topo_edge *ed = &g->out[e];
                qm_link_class cls = ed->cls > lab.cls ? ed->cls : lab.cls;
                double bw = ed->bw < lab.bw ? ed->bw : lab.bw;
                int hops = lab.hops + 1;
                if (dominated(g, ed->to, cls, bw, hops))
                    continue;
                if ((rc = reserve_label(g, src, st)) != QM_OK) {
                    g->cached_src = -1;
                    return rc;
                }
                int ni = g->n_labels++;
                g->labels[ni] = (topo_label){.node = ed->to, .pred = li, .edge = e, .hops = hops,
                                             .cls = cls, .bw = bw,
                                             .latency_s = lab.latency_s + ed->latency_s,
                                             .next_perm = -1};
                heap_push(g, ni);
            }
        }
        if (lab.node == dst)
            return QM_OK; /* its first permanent label is its best: the rest can wait */
    }
    g->search_done = true;
    return QM_OK;
}

static qm_code fill_path(const qm_topo_graph *g, int src, int dst, qm_topo_path *out, qm_status *st)
{
    memset(out, 0, sizeof *out);
    out->src = src;
    out->dst = dst;
    int l = g->best[dst];
    if (l < 0)
        return QM_OK;
    const topo_label *lab = &g->labels[l];
    if (lab->hops > QM_TOPO_PATH_MAX_HOPS)
        return qm_fail(st, QM_E_UNSUPPORTED,
                       "topology: the path from %.64s to %.64s has %d links, more than the %d a path "
                       "can report",
                       g->topo->nodes[src].id, g->topo->nodes[dst].id, lab->hops,
                       QM_TOPO_PATH_MAX_HOPS);
    out->found = true;
    out->cls = lab->cls;
    out->bw_bytes_per_s = lab->bw;
    out->latency_s = lab->latency_s;
    out->hops = lab->hops;
    out->nodes[0] = src;
    for (int k = lab->hops - 1; k >= 0; --k) {
        const topo_label *cur = &g->labels[l];
        const topo_edge *ed = &g->out[cur->edge];
        out->links[k] = ed->link;
        out->a_to_b[k] = ed->a_to_b;
        out->nodes[k + 1] = cur->node;
        l = cur->pred;
    }
    return QM_OK;
}

qm_code qm_topo_graph_path(qm_topo_graph *g, int src, int dst, qm_topo_path *out, qm_status *st)
{
    qm_code rc;
    if (!g || !out)
        return qm_fail(st, QM_E_ARG, "topology: graph and out must not be NULL");
    if (src < 0 || src >= g->n_nodes || dst < 0 || dst >= g->n_nodes)
        return qm_fail(st, QM_E_ARG, "topology: path %d -> %d: node out of range (%d nodes)", src, dst,
                       g->n_nodes);
    if ((rc = search(g, src, dst, st)) != QM_OK)
        return rc;
    return fill_path(g, src, dst, out, st);
}

/* The path rule's order on (found, class, bandwidth, hops): found first, then the key. */
typedef struct path_key {
    bool found;
    qm_link_class cls;
    double bw;
    int hops;
} path_key;

static bool key_better(path_key a, path_key b)
{
    if (a.found != b.found)
        return a.found;
    if (a.cls != b.cls)
        return a.cls < b.cls;
    if (a.bw != b.bw)
        return a.bw > b.bw;
    return a.hops < b.hops;
}

/* Whether path a is better than b by the path rule (found first). */
static bool path_better(const qm_topo_path *a, const qm_topo_path *b)
{
    return key_better((path_key){a->found, a->cls, a->bw_bytes_per_s, a->hops},
                      (path_key){b->found, b->cls, b->bw_bytes_per_s, b->hops});
}

/* `what` names the argument in the message: "device", "device set entry 2". */
static qm_code check_gpu(const qm_topo_graph *g, int node, const char *what, qm_status *st)
{
    if (node < 0 || node >= g->n_nodes)
        return qm_fail(st, QM_E_ARG, "topology: %s is node %d, out of range (%d nodes)", what, node,
                       g->n_nodes);
    const qm_node *n = &g->topo->nodes[node];
    if (n->kind != QM_NODE_GPU)
        return qm_fail(st, QM_E_ARG, "topology: %s is node %d (%.64s), a %s, not a GPU", what, node,
                       n->id, kind_names[n->kind]);
    return QM_OK;
}

qm_code qm_topo_graph_ingest_path(qm_topo_graph *g, int gpu, bool to_device, qm_topo_path *out,
                                  qm_status *st)
{
    qm_code rc;
    if (!g || !out)
        return qm_fail(st, QM_E_ARG, "topology: graph and out must not be NULL");
    if ((rc = check_gpu(g, gpu, "the device", st)) != QM_OK)
        return rc;
    const qm_node *n = &g->topo->nodes[gpu];
    if (n->numa >= 0)
        return to_device ? qm_topo_graph_path(g, n->numa, gpu, out, st)
                         : qm_topo_graph_path(g, gpu, n->numa, out, st);
    /* No NUMA node of its own: the best of its host's. */
    qm_topo_path cand;
    bool have = false;
    memset(out, 0, sizeof *out);
    out->src = to_device ? -1 : gpu;
    out->dst = to_device ? gpu : -1;
    for (int v = 0; v < g->n_nodes; ++v) {
        const qm_node *m = &g->topo->nodes[v];
        if (m->kind != QM_NODE_NUMA || m->host != n->host)
            continue;
        rc = to_device ? qm_topo_graph_path(g, v, gpu, &cand, st)
                       : qm_topo_graph_path(g, gpu, v, &cand, st);
        if (rc != QM_OK)
            return rc;
        if (!have || path_better(&cand, out))
            *out = cand; /* the first NUMA node wins ties: lowest node index */
        have = true;
    }
    return QM_OK;
}

/* ---- device matrix --------------------------------------------------------------------------- */

void qm_topo_matrix_destroy(qm_topo_matrix *m)
{
    if (!m)
        return;
    free(m->nodes);
    free(m->ids);
    free(m->pairs);
    free(m);
}

static int cmp_int_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

qm_code qm_topo_matrix_create(qm_topo_graph *g, const int *devices, int n_devices,
                              qm_topo_matrix **out, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_topo_matrix *m = NULL;
    int *seen = NULL;
    if (out)
        *out = NULL;
    if (!g || !devices || !out)
        return qm_fail(st, QM_E_ARG, "topology: graph, devices and out must not be NULL");
    if (n_devices < 1)
        return qm_fail(st, QM_E_ARG, "topology: a device set needs at least 1 device (got %d)",
                       n_devices);
    if ((size_t)n_devices > SIZE_MAX / sizeof(qm_topo_pair) / (size_t)n_devices)
        return qm_fail(st, QM_E_ARG, "topology: device set too large for a matrix (%d devices)",
                       n_devices);
    for (int i = 0; i < n_devices; ++i) {
        char what[32];
        snprintf(what, sizeof what, "device set entry %d", i);
        if ((rc = check_gpu(g, devices[i], what, st)) != QM_OK)
            return rc;
    }

    /* duplicates: sort (node, entry) pairs; linear in the set, not in the graph */
    seen = malloc((size_t)n_devices * 2 * sizeof *seen);
    m = calloc(1, sizeof *m);
    if (!seen || !m)
        goto nomem;
    for (int i = 0; i < n_devices; ++i) {
        seen[2 * i] = devices[i];
        seen[2 * i + 1] = i;
    }
    qsort(seen, (size_t)n_devices, 2 * sizeof *seen, cmp_int_pair);
    for (int i = 1; i < n_devices; ++i) {
        if (seen[2 * i] == seen[2 * i - 2]) {
            rc = qm_fail(st, QM_E_ARG,
                         "topology: device %.64s (node %d) appears twice in the device set (entries "
                         "%d and %d)",
                         g->topo->nodes[seen[2 * i]].id, seen[2 * i], seen[2 * i - 1], seen[2 * i + 1]);
            goto fail;
        }
    }
    m->n = n_devices;
    m->nodes = malloc((size_t)n_devices * sizeof *m->nodes);
    m->ids = malloc((size_t)n_devices * sizeof *m->ids);
    m->pairs = calloc((size_t)n_devices * (size_t)n_devices, sizeof *m->pairs);
    if (!m->nodes || !m->ids || !m->pairs)
        goto nomem;
    for (int i = 0; i < n_devices; ++i) {
        const qm_node *nd = &g->topo->nodes[devices[i]];
        m->nodes[i] = devices[i];
        snprintf(m->ids[i], sizeof m->ids[i], "%s", nd->id);
    }
    for (int i = 0; i < n_devices; ++i) {
        for (int j = 0; j < n_devices; ++j) {
            qm_topo_pair *p = &m->pairs[(size_t)i * (size_t)n_devices + (size_t)j];
            if (i == j) {
                const qm_node *nd = &g->topo->nodes[devices[i]];
                double hbm = nd->hbm_bw_bytes_per_s;
                if (!(hbm > 0) && nd->type >= 0 && nd->type < g->topo->n_device_types &&
                    g->topo->device_types)
                    hbm = g->topo->device_types[nd->type].hbm_bw_bytes_per_s;
                *p = (qm_topo_pair){.self = true, .peer = true, .cls = QM_LINK_NVLINK,
                                    .bw_bytes_per_s = hbm > 0 ? hbm * g->topo->hbm_efficiency
                                                              : INFINITY};
                continue;
            }
            qm_topo_path path;
            if ((rc = qm_topo_graph_path(g, devices[i], devices[j], &path, st)) != QM_OK)
                goto fail;
            *p = (qm_topo_pair){.peer = path.found, .cls = path.cls,
                                .bw_bytes_per_s = path.bw_bytes_per_s,
                                .latency_s = path.latency_s, .hops = path.hops};
        }
    }
    free(seen);
    *out = m;
    return QM_OK;

nomem:
    rc = qm_fail(st, QM_E_NOMEM, "topology: out of host memory for a matrix of %d devices", n_devices);
fail:
    free(seen);
    qm_topo_matrix_destroy(m);
    return rc;
}

static int matrix_pos(const qm_topo_matrix *m, int node)
{
    for (int i = 0; i < m->n; ++i)
        if (m->nodes[i] == node)
            return i;
    return -1;
}

const qm_topo_pair *qm_topo_matrix_get(const qm_topo_matrix *m, int from, int to)
{
    if (!m)
        return NULL;
    int i = matrix_pos(m, from), j = matrix_pos(m, to);
    if (i < 0 || j < 0)
        return NULL;
    return &m->pairs[(size_t)i * (size_t)m->n + (size_t)j];
}

/* The pair between positions i and j taken by its worse direction. */
typedef struct sym_pair {
    bool peer;
    qm_link_class cls;
    double bw;
    int hops;
} sym_pair;

static sym_pair sym(const qm_topo_matrix *m, int i, int j)
{
    const qm_topo_pair *a = &m->pairs[(size_t)i * (size_t)m->n + (size_t)j];
    const qm_topo_pair *b = &m->pairs[(size_t)j * (size_t)m->n + (size_t)i];
    sym_pair s = {.peer = a->peer && b->peer};
    if (s.peer) {
        s.cls = a->cls > b->cls ? a->cls : b->cls;
        s.bw = a->bw_bytes_per_s < b->bw_bytes_per_s ? a->bw_bytes_per_s : b->bw_bytes_per_s;
        s.hops = a->hops > b->hops ? a->hops : b->hops;
    }
    return s;
}

/* Whether x is a strictly better pair than y: a path, then class, bandwidth, hops. */
static bool sym_better(const sym_pair *x, const sym_pair *y)
{
    if (x->peer != y->peer)
        return x->peer;
    if (!x->peer)
        return false;
    if (x->cls != y->cls)
        return x->cls < y->cls;
    if (x->bw != y->bw)
        return x->bw > y->bw;
    return x->hops < y->hops;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

qm_code qm_topo_matrix_best_connected(const qm_topo_matrix *m, int *out_node, qm_status *st)
{
    if (!m || !out_node || m->n < 1)
        return qm_fail(st, QM_E_ARG, "topology: matrix (non-empty) and out_node must not be NULL");
    double *bws = malloc((size_t)m->n * sizeof *bws);
    if (!bws)
        return qm_fail(st, QM_E_NOMEM, "topology: out of host memory ranking %d devices", m->n);
    int best = -1, best_unreach = 0;
    qm_link_class best_worst = QM_LINK_NVLINK;
    double best_sum = 0;
    for (int i = 0; i < m->n; ++i) {
        int unreach = 0, n_bw = 0;
        int worst = QM_LINK_NVLINK;
        for (int j = 0; j < m->n; ++j) {
            if (j == i)
                continue;
            sym_pair s = sym(m, i, j);
            if (!s.peer) {
                ++unreach;
                continue;
            }
            if ((int)s.cls > worst)
                worst = (int)s.cls;
            bws[n_bw++] = s.bw;
        }
        if (n_bw == 0 && m->n > 1)
            worst = QM_LINK_CLASS_COUNT_; /* reaches nobody: worse than any class */
        qsort(bws, (size_t)n_bw, sizeof *bws, cmp_desc);
        double sum = 0;
        for (int k = 0; k < n_bw; ++k)
            sum += bws[k];
        bool better = best < 0 || unreach < best_unreach ||
                      (unreach == best_unreach &&
                       (worst < (int)best_worst || (worst == (int)best_worst && sum > best_sum)));
        if (better) {
            best = i;
            best_unreach = unreach;
            best_worst = (qm_link_class)worst;
            best_sum = sum;
        }
    }
    free(bws);
    *out_node = m->nodes[best];
    return QM_OK;
}

qm_code qm_topo_matrix_affinity_order(const qm_topo_matrix *m, int *out_nodes, qm_status *st)
{
    qm_code rc;
    int first;
    if (!m || !out_nodes || m->n < 1)
        return qm_fail(st, QM_E_ARG, "topology: matrix (non-empty) and out_nodes must not be NULL");
    if ((rc = qm_topo_matrix_best_connected(m, &first, st)) != QM_OK)
        return rc;
    int *placed = malloc((size_t)m->n * sizeof *placed); /* positions, in placement order */
    bool *is_placed = calloc((size_t)m->n, sizeof *is_placed);
    if (!placed || !is_placed) {
        free(placed);
        free(is_placed);
        return qm_fail(st, QM_E_NOMEM, "topology: out of host memory ordering %d devices", m->n);
    }
    placed[0] = matrix_pos(m, first);
    is_placed[placed[0]] = true;
    for (int k = 1; k < m->n; ++k) {
        int chosen = -1;
        sym_pair chosen_pair = {0};
        for (int back = k - 1; back >= 0 && chosen < 0; --back) {
            int anchor = placed[back];
            for (int c = 0; c < m->n; ++c) {
                if (is_placed[c])
                    continue;
                sym_pair s = sym(m, anchor, c);
                if (s.peer && (chosen < 0 || sym_better(&s, &chosen_pair))) {
                    chosen = c;
                    chosen_pair = s;
                }
            }
        }
        for (int c = 0; chosen < 0 && c < m->n; ++c)
            if (!is_placed[c])
                chosen = c;
        placed[k] = chosen;
        is_placed[chosen] = true;
    }
    for (int k = 0; k < m->n; ++k)
        out_nodes[k] = m->nodes[placed[k]];
    free(placed);
    free(is_placed);
    return QM_OK;
}

qm_code qm_topo_matrix_check_connected(const qm_topo_matrix *m, qm_status *st)
{
    if (!m)
        return qm_fail(st, QM_E_ARG, "topology: matrix must not be NULL");
    for (int i = 0; i < m->n; ++i)
        for (int j = i + 1; j < m->n; ++j)
            for (int d = 0; d < 2; ++d) {
                int from = d ? j : i, to = d ? i : j;
                if (m->pairs[(size_t)from * (size_t)m->n + (size_t)to].peer)
                    continue;
                return qm_fail(st, QM_E_DISCONNECTED,
                               "topology: no path from device %.64s to device %.64s (nodes %d -> %d, "
                               "in a set of %d devices); connect them with a link or fabric, or "
                               "leave one of them out",
                               m->ids[from], m->ids[to], m->nodes[from], m->nodes[to], m->n);
            }
    return QM_OK;
}

/* ---- a device set that hangs off one node ----------------------------------------------------- */

/* Whether edge key (cls, bw) is strictly worse than (pc, pb) by the path rule's first two terms. */
static bool edge_worse(const topo_edge *e, qm_link_class pc, double pb)
{
    return e->cls > pc || (e->cls == pc && e->bw < pb);
}

static bool same_edge_attrs(const topo_edge *a, const topo_edge *b)
{
    return a->cls == b->cls && a->bw == b->bw && a->latency_s == b->latency_s;
}

/* Every edge of [first, end) but one copy of `hub_edge` (to == hub, same attributes) is strictly
 * worse than the pair key; exactly one such copy exists. */
static bool only_hub_edge_best(const topo_edge *first, const topo_edge *end, int hub,
                               const topo_edge *hub_edge, qm_link_class pc, double pb)
{
    int n_hub = 0;
    for (const topo_edge *e = first; e < end; ++e) {
        if (e->to == hub && same_edge_attrs(e, hub_edge) && n_hub == 0)
            ++n_hub;
        else if (!edge_worse(e, pc, pb))
            return false;
    }
    return n_hub == 1;
}

bool qm_topo_graph_uniform_hub(qm_topo_graph *g, const int *devices, int n_devices, int *out_hub,
                               qm_topo_pair *out_pair)
{
    if (!g || !devices || n_devices < 2)
        return false;
    if (g->mark_gen == INT_MAX) {
        memset(g->mark, 0, (size_t)g->n_nodes * sizeof *g->mark);
        g->mark_gen = 0;
    }
    const int gen = ++g->mark_gen;
    for (int i = 0; i < n_devices; ++i) {
        const int d = devices[i];
        if (d < 0 || d >= g->n_nodes || g->topo->nodes[d].kind != QM_NODE_GPU || g->mark[d] == gen)
            return false; /* the matrix path reports it */
        g->mark[d] = gen;
    }
    /* the hub: the first device's strictly best outgoing edge leads to it */
    const int d0 = devices[0];
    const topo_edge *o = NULL, *in = NULL;
    for (int e = g->out_start[d0]; e < g->out_start[d0 + 1]; ++e) {
        const topo_edge *ed = &g->out[e];
        if (!o || edge_worse(o, ed->cls, ed->bw))
            o = ed;
    }
    if (!o || g->topo->nodes[o->to].kind == QM_NODE_GPU)
        return false;
    const int hub = o->to;
    for (int e = g->in_start[d0]; e < g->in_start[d0 + 1]; ++e) {
        const topo_edge *ed = &g->in[e];
        if (ed->to == hub && (!in || edge_worse(in, ed->cls, ed->bw)))
            in = ed;
    }
    if (!in)
        return false;
    const qm_link_class pc = o->cls > in->cls ? o->cls : in->cls;
    const double pb = o->bw < in->bw ? o->bw : in->bw;
    /* every device: one edge to the hub and one back with these figures, every other edge strictly
     * worse than the pair through the hub; then i -> hub -> j is the only best path of each pair */
    for (int i = 0; i < n_devices; ++i) {
        const int d = devices[i];
        if (!only_hub_edge_best(g->out + g->out_start[d], g->out + g->out_start[d + 1], hub, o, pc, pb) ||
            !only_hub_edge_best(g->in + g->in_start[d], g->in + g->in_start[d + 1], hub, in, pc, pb))
            return false;
    }
    if (out_hub)
        *out_hub = hub;
    if (out_pair)
        *out_pair = (qm_topo_pair){.peer = true, .cls = pc, .bw_bytes_per_s = pb,
                                   .latency_s = o->latency_s + in->latency_s, .hops = 2};
    return true;
}

/* ---- conveniences over a device set ---------------------------------------------------------- */

qm_code qm_topo_graph_best_connected(qm_topo_graph *g, const int *devices, int n_devices,
                                     int *out_node, qm_status *st)
{
    if (qm_topo_graph_uniform_hub(g, devices, n_devices, NULL, NULL)) {
        *out_node = devices[0]; /* every score ties: the earliest */
        return QM_OK;
    }
    qm_topo_matrix *m = NULL;
    qm_code rc = qm_topo_matrix_create(g, devices, n_devices, &m, st);
    if (rc == QM_OK)
        rc = qm_topo_matrix_best_connected(m, out_node, st);
    qm_topo_matrix_destroy(m);
    return rc;
}

qm_code qm_topo_graph_affinity_order(qm_topo_graph *g, const int *devices, int n_devices,
                                     int *out_nodes, qm_status *st)
{
    if (qm_topo_graph_uniform_hub(g, devices, n_devices, NULL, NULL)) {
        /* every pair ties: the first, then each next one in given order */
        memcpy(out_nodes, devices, (size_t)n_devices * sizeof *out_nodes);
        return QM_OK;
    }
    qm_topo_matrix *m = NULL;
    qm_code rc = qm_topo_matrix_create(g, devices, n_devices, &m, st);
    if (rc == QM_OK)
        rc = qm_topo_matrix_affinity_order(m, out_nodes, st);
    qm_topo_matrix_destroy(m);
    return rc;
}

qm_code qm_topo_graph_check_connected(qm_topo_graph *g, const int *devices, int n_devices,
                                      qm_status *st)
{
    if (qm_topo_graph_uniform_hub(g, devices, n_devices, NULL, NULL))
        return QM_OK;
    qm_topo_matrix *m = NULL;
    qm_code rc = qm_topo_matrix_create(g, devices, n_devices, &m, st);
    if (rc == QM_OK)
        rc = qm_topo_matrix_check_connected(m, st);
    qm_topo_matrix_destroy(m);
    return rc;
}

/* Whether pair a is better than pair b for a best peer: found, class, bandwidth, hops. */
static bool best_peer_better(const qm_topo_pair *a, const qm_topo_pair *b)
{
    return key_better((path_key){a->peer, a->cls, a->bw_bytes_per_s, a->hops},
                      (path_key){b->peer, b->cls, b->bw_bytes_per_s, b->hops});
}

qm_code qm_topo_graph_best_peers(qm_topo_graph *g, const int *devices, int n_devices,
                                 qm_topo_pair *out, qm_status *st)
{
    qm_topo_pair pair;
    if (!g || !devices || !out || n_devices < 1)
        return qm_fail(st, QM_E_ARG, "topology: best peers: graph, devices and out must be given "
                       "(%d devices)", n_devices);
    if (n_devices == 1) {
        out[0] = (qm_topo_pair){.peer = false};
        return QM_OK;
    }
    if (qm_topo_graph_uniform_hub(g, devices, n_devices, NULL, &pair)) {
        for (int i = 0; i < n_devices; ++i)
            out[i] = pair;
        return QM_OK;
    }
    qm_topo_matrix *m = NULL;
    qm_code rc = qm_topo_matrix_create(g, devices, n_devices, &m, st);
    for (int i = 0; rc == QM_OK && i < n_devices; ++i) {
        out[i] = (qm_topo_pair){.peer = false};
        for (int j = 0; j < n_devices; ++j) {
            const qm_topo_pair *p = &m->pairs[(size_t)i * (size_t)n_devices + (size_t)j];
            if (j != i && best_peer_better(p, &out[i]))
                out[i] = *p;
        }
    }
    qm_topo_matrix_destroy(m);
    return rc;
}

qm_code qm_topo_graph_matrix_json(qm_topo_graph *g, const int *devices, int n_devices,
                                  struct json_t **out, qm_status *st)
{
    qm_topo_matrix *m = NULL;
    if (out)
        *out = NULL;
    qm_code rc = qm_topo_matrix_create(g, devices, n_devices, &m, st);
    if (rc == QM_OK)
        rc = qm_topo_matrix_json(m, out, st);
    qm_topo_matrix_destroy(m);
    return rc;
}

/* ---- renderings ------------------------------------------------------------------------------ */

static void pair_cell(const qm_topo_pair *p, char *buf, size_t n)
{
    if (p->self)
        snprintf(buf, n, "X");
    else if (!p->peer)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%s %.1f", class_names[p->cls], p->bw_bytes_per_s / 1e9);
}

qm_code qm_topo_matrix_print(const qm_topo_matrix *m, FILE *f, qm_status *st)
{
    if (!m || !f)
        return qm_fail(st, QM_E_ARG, "topology: matrix and file must not be NULL");
    char cell[64];
    int w_id = 0, w = 1;
    for (int i = 0; i < m->n; ++i) {
        int len = (int)strlen(m->ids[i]);
        if (len > w_id)
            w_id = len;
        if (len > w)
            w = len;
        for (int j = 0; j < m->n; ++j) {
            pair_cell(&m->pairs[(size_t)i * (size_t)m->n + (size_t)j], cell, sizeof cell);
            len = (int)strlen(cell);
            if (len > w)
                w = len;
        }
    }
    fprintf(f, "%-*s", w_id, "");
    for (int j = 0; j < m->n; ++j) {
        if (j + 1 < m->n)
            fprintf(f, "  %-*s", w, m->ids[j]);
        else
            fprintf(f, "  %s", m->ids[j]);
    }
    fputc('\n', f);
    for (int i = 0; i < m->n; ++i) {
        fprintf(f, "%-*s", w_id, m->ids[i]);
        for (int j = 0; j < m->n; ++j) {
            pair_cell(&m->pairs[(size_t)i * (size_t)m->n + (size_t)j], cell, sizeof cell);
            if (j + 1 < m->n)
                fprintf(f, "  %-*s", w, cell);
            else
                fprintf(f, "  %s", cell);
        }
        fputc('\n', f);
    }
    fprintf(f, "X = self; - = no path (no peer access); otherwise link class and GB/s per direction "
               "(row -> column, after efficiency)\n");
    if (ferror(f))
        return qm_fail(st, QM_E_IO, "topology: writing the device matrix failed (%d devices)", m->n);
    return QM_OK;
}

qm_code qm_topo_matrix_json(const qm_topo_matrix *m, struct json_t **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!m || !out)
        return qm_fail(st, QM_E_ARG, "topology: matrix and out must not be NULL");
    json_t *root = json_object();
    json_t *devs = json_array();
    json_t *rows = json_array();
    if (!root || !devs || !rows)
        goto nomem_loose;
    if (json_object_set(root, "devices", devs) != 0 || json_object_set(root, "matrix", rows) != 0)
        goto nomem_loose;
    for (int i = 0; i < m->n; ++i) {
        json_t *d = json_object();
        if (json_array_append_new(devs, d) != 0 ||
            json_object_set_new(d, "id", json_string(m->ids[i])) != 0 ||
            json_object_set_new(d, "node", json_integer(m->nodes[i])) != 0)
            goto nomem_loose;
        json_t *row = json_array();
        if (json_array_append_new(rows, row) != 0)
            goto nomem_loose;
        for (int j = 0; j < m->n; ++j) {
            const qm_topo_pair *p = &m->pairs[(size_t)i * (size_t)m->n + (size_t)j];
            json_t *c = json_object();
            if (json_array_append_new(row, c) != 0)
                goto nomem_loose;
            bool bw_known = p->peer && isfinite(p->bw_bytes_per_s);
            if (json_object_set_new(c, "self", json_boolean(p->self)) != 0 ||
                json_object_set_new(c, "peer", json_boolean(p->peer)) != 0 ||
                json_object_set_new(c, "class", p->peer ? json_string(class_names[p->cls])
                                                        : json_null()) != 0 ||
                json_object_set_new(c, "bw_bytes_per_s",
                                    bw_known ? json_real(p->bw_bytes_per_s) : json_null()) != 0 ||
                json_object_set_new(c, "latency_s",
                                    p->peer ? json_real(p->latency_s) : json_null()) != 0 ||
                json_object_set_new(c, "hops", p->peer ? json_integer(p->hops) : json_null()) != 0)
                goto nomem_loose;
        }
    }
    json_decref(devs);
    json_decref(rows);
    *out = root;
    return QM_OK;

nomem_loose:
    json_decref(devs);
    json_decref(rows);
    json_decref(root);
    return qm_fail(st, QM_E_NOMEM, "topology: out of host memory building the matrix JSON (%d devices)",
                   m->n);
}

static void dot_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static const char *dot_shape(qm_node_kind k)
{
    switch (k) {
    case QM_NODE_GPU: return "box";
    case QM_NODE_NUMA: return "ellipse";
    case QM_NODE_PCIE_SWITCH: return "diamond";
    case QM_NODE_NVSWITCH: return "hexagon";
    case QM_NODE_NIC: return "parallelogram";
    case QM_NODE_FABRIC_SWITCH: return "octagon";
    }
    return "plaintext";
}

/* A node: its id and kind, and the style's note as a third label line. */
static void dot_node(FILE *f, const qm_node *n, const char *indent, const char *note,
                     const char *attrs)
{
    fprintf(f, "%s", indent);
    dot_quoted(f, n->id);
    fprintf(f, " [shape=%s, label=", dot_shape(n->kind));
    char label[QM_ID_BYTES + 32 + 256];
    snprintf(label, sizeof label, "%s\n%s%s%.255s", n->id, kind_names[n->kind],
             note && *note ? "\n" : "", note ? note : "");
    /* a real newline inside a DOT string would still parse; use the escape instead */
    fputc('"', f);
    for (const char *s = label; *s; ++s) {
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
    if (attrs && *attrs)
        fprintf(f, ", %s", attrs);
    fputs("];\n", f);
}

static const char *style_at(const char *const *v, int i)
{
    return v ? v[i] : NULL;
}

qm_code qm_topo_graph_dot(const qm_topo_graph *g, FILE *f, qm_status *st)
{
    return qm_topo_graph_dot_styled(g, NULL, f, st);
}

qm_code qm_topo_graph_dot_styled(const qm_topo_graph *g, const qm_topo_dot_style *style, FILE *f,
                                 qm_status *st)
{
    if (!g || !f)
        return qm_fail(st, QM_E_ARG, "topology: graph and file must not be NULL");
    const qm_topology *t = g->topo;
    const qm_topo_dot_style none = {0};
    if (!style)
        style = &none;
    fputs("graph ", f);
    dot_quoted(f, t->name[0] ? t->name : "qmesh");
    fputs(" {\n", f);
    if (style->graph_label) {
        fputs("  label=", f);
        dot_quoted(f, style->graph_label);
        fputs(";\n", f);
    }
    for (int h = 0; h < t->n_hosts; ++h) {
        char cluster[QM_ID_BYTES + 16];
        snprintf(cluster, sizeof cluster, "cluster_%s", t->hosts[h].id);
        fputs("  subgraph ", f);
        dot_quoted(f, cluster);
        fputs(" {\n    label=", f);
        dot_quoted(f, t->hosts[h].id);
        fputs(";\n", f);
        for (int i = 0; i < t->n_nodes; ++i)
            if (t->nodes[i].host == h)
                dot_node(f, &t->nodes[i], "    ", style_at(style->node_note, i),
                         style_at(style->node_attrs, i));
        fputs("  }\n", f);
    }
    for (int i = 0; i < t->n_nodes; ++i)
        if (t->nodes[i].host < 0 || t->nodes[i].host >= t->n_hosts)
            dot_node(f, &t->nodes[i], "  ", style_at(style->node_note, i),
                     style_at(style->node_attrs, i));
    for (int i = 0; i < g->n_links; ++i) {
        const qm_link *l = &g->links[i];
        char ab[32], ba[32];
        qm_format_rate(l->bw_ab_bytes_per_s, ab, sizeof ab);
        qm_format_rate(l->bw_ba_bytes_per_s, ba, sizeof ba);
        fputs("  ", f);
        dot_quoted(f, t->nodes[l->a].id);
        fputs(" -- ", f);
        dot_quoted(f, t->nodes[l->b].id);
        if (l->bw_ab_bytes_per_s == l->bw_ba_bytes_per_s)
            fprintf(f, " [label=\"%s %s\"", class_names[l->cls], ab);
        else
            fprintf(f, " [label=\"%s %s / %s\"", class_names[l->cls], ab, ba);
        if (i >= t->n_links)
            fputs(", style=dashed", f);
        const char *attrs = style_at(style->link_attrs, i);
        if (attrs && *attrs)
            fprintf(f, ", %s", attrs);
        fputs("];\n", f);
    }
    fputs("}\n", f);
    if (ferror(f))
        return qm_fail(st, QM_E_IO, "topology: writing the Graphviz graph failed (%d nodes, %d links)",
                       g->n_nodes, g->n_links);
    return QM_OK;
}
