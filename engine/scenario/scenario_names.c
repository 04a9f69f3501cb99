/* scenario_names.c — the names and plain helpers that scenario.h declares.
 *
 * Role: link class and phase names, request defaults, the topology's class default latencies and
 * its destructor, the topology's labels, the one array growth of the loader and the variant
 * builder (qm_topology_grow) and a device id's "did you mean" (qm_topology_closest_gpu, by core's
 * qm_hint_closer). In: enum values, a topology. Out: static strings, initialised structs.
 * Class default latencies (NCCL's per-step hardware latencies, src/graph/tuning.cc hwLat, ring LL;
 * docs/scenario-library.md): nvlink and
 * c2c 0.6 us, pcie and sys 1.0 us, net 2.7 us; `defaults.latency` overrides them. The data
 * path's defaults (storage read and write, host copy) are those of scenario.h.
 * Must not: print, or depend on the loader's state; qm_topology_grow is its one allocation.
 */
#include "scenario_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(((qm_request *)0)->gather) == QM_ID_BYTES, "qm_request.gather holds an id");

/* ---- names and plain helpers of scenario.h ---------------------------------------------------- */

const char *const qm_scn_class_names[QM_LINK_CLASS_COUNT_] = {"nvlink", "c2c", "pcie", "sys",
                                                              "net"};
static const char *const phase_names[QM_PHASE_COUNT_] = {"ingest", "local_norm", "norm_allreduce",
                                                         "encode", "gather"};

const char *qm_link_class_name(qm_link_class c)
{
    return (int)c >= 0 && c < QM_LINK_CLASS_COUNT_ ? qm_scn_class_names[c] : NULL;
}

const char *qm_phase_name(qm_phase p)
{
    return (int)p >= 0 && p < QM_PHASE_COUNT_ ? phase_names[p] : NULL;
}

void qm_request_init(qm_request *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->qubits = 0;
    r->dtype = QM_DTYPE_COMPLEX64;
    r->policy = QM_POLICY_AUTO;
    r->batch = 1;
    r->features = 0;
    r->encoding = QM_ENCODING_AMPLITUDE;
    snprintf(r->gather, sizeof r->gather, "auto");
    r->ranks = 0;
}

void qm_topology_destroy(qm_topology *t)
{
    if (!t)
        return;
    free(t->description);
    for (int i = 0; i < t->n_sources; ++i)
        free(t->sources[i]);
    free(t->sources);
    free(t->device_types);
    free(t->hosts);
    free(t->nodes);
    free(t->links);
    for (int i = 0; i < t->n_fabrics; ++i)
        free(t->fabrics[i].members);
    free(t->fabrics);
    for (int i = 0; i < t->n_ranks; ++i)
        free(t->ranks[i].devices);
    free(t->ranks);
    for (int i = 0; i < t->n_cases; ++i) {
        free(t->cases[i].expect.devices);
        free(t->cases[i].expect.ranks);
    }
    free(t->cases);
    free(t->gpus);
    free(t);
}

void qm_topology_defaults_init(qm_topology *t)
{
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        t->efficiency[c] = 1.0;
    t->hbm_efficiency = 1.0;
    t->default_reserve_bytes = 0;
    t->latency_s[QM_LINK_NVLINK] = 0.6e-6;
    t->latency_s[QM_LINK_C2C] = 0.6e-6;
    t->latency_s[QM_LINK_PCIE] = 1.0e-6;
    t->latency_s[QM_LINK_SYS] = 1.0e-6;
    t->latency_s[QM_LINK_NET] = 2.7e-6;
    t->host_link_bw_bytes_per_s = QM_DEFAULT_HOST_LINK_BW;
    t->storage_read_bw_bytes_per_s = QM_DEFAULT_STORAGE_READ_BW;
    t->storage_write_bw_bytes_per_s = QM_DEFAULT_STORAGE_WRITE_BW;
    t->host_copy_bw_bytes_per_s = QM_DEFAULT_HOST_COPY_BW;
    t->storage_cached_read_bw_bytes_per_s = QM_DEFAULT_CACHED_READ_BW;
    t->storage_remove_bw_bytes_per_s = QM_DEFAULT_STORAGE_REMOVE_BW;
    t->launch_s = QM_DEFAULT_LAUNCH_S;
    t->page_lock_s = QM_DEFAULT_PAGE_LOCK_S;
    t->page_lock_bw_bytes_per_s = QM_DEFAULT_PAGE_LOCK_BW;
    t->staging_setup_s = QM_DEFAULT_STAGING_SETUP_S;
    t->state_alloc_bw_bytes_per_s = QM_DEFAULT_STATE_ALLOC_BW;
    t->staging_open_s = QM_DEFAULT_STAGING_OPEN_S;
    t->piece_roots_s = QM_DEFAULT_PIECE_ROOTS_S;
    t->host_piece_s = QM_DEFAULT_HOST_PIECE_S;
    t->host_coeff_s = QM_DEFAULT_HOST_COEFF_S;
}

/* A host's own figure v where it gives one (> 0), else the scenario's default. */
static double or_default(double v, double def) { return v > 0 ? v : def; }
static const qm_host *host_at(const qm_topology *t, int h)
{
    return h >= 0 && h < t->n_hosts ? &t->hosts[h] : NULL;
}

double qm_host_cached_read_bw(const qm_topology *t, int h)
{
    const qm_host *ho = host_at(t, h);
    return or_default(ho ? ho->storage_cached_read_bw_bytes_per_s : 0,
                      t->storage_cached_read_bw_bytes_per_s);
}

double qm_host_remove_bw(const qm_topology *t, int h)
{
    const qm_host *ho = host_at(t, h);
    return or_default(ho ? ho->storage_remove_bw_bytes_per_s : 0, t->storage_remove_bw_bytes_per_s);
}

void qm_host_storage_bw(const qm_topology *t, int h, double *read_bw, double *write_bw)
{
    const qm_host *ho = host_at(t, h);
    *read_bw = or_default(ho ? ho->storage_read_bw_bytes_per_s : 0, t->storage_read_bw_bytes_per_s);
    *write_bw = or_default(ho ? ho->storage_write_bw_bytes_per_s : 0,
                           t->storage_write_bw_bytes_per_s);
}

int qm_topology_implicit_links(const qm_topology *t, int *target)
{
    for (int i = 0; i < t->n_nodes; ++i) {
        const qm_node *n = &t->nodes[i];
        int to = -1;
        if (n->kind == QM_NODE_NIC && n->nic_bw_bytes_per_s > 0)
            to = n->attach >= 0 ? n->attach : n->numa;
        else if (n->kind == QM_NODE_GPU && t->host_link_bw_bytes_per_s > 0)
            to = n->numa;
        target[i] = to == i ? -1 : to;
    }
    for (int i = 0; i < t->n_links; ++i) {
        const qm_link *l = &t->links[i];
        const bool host_class = l->cls == QM_LINK_PCIE || l->cls == QM_LINK_SYS || l->cls == QM_LINK_C2C;
        for (int end = 0; end < 2; ++end) {
            const int me = end ? l->b : l->a, other = end ? l->a : l->b;
            if (target[me] < 0)
                continue;
            if (target[me] == other || (t->nodes[me].kind == QM_NODE_GPU && host_class))
                target[me] = -1;
        }
    }
    int n = 0;
    for (int i = 0; i < t->n_nodes; ++i)
        n += target[i] >= 0;
    return n;
}

double qm_topology_implicit_bw(const qm_topology *t, int i)
{
    const qm_node *n = &t->nodes[i];
    return n->kind == QM_NODE_NIC ? n->nic_bw_bytes_per_s : t->host_link_bw_bytes_per_s;
}

const char *qm_topology_label(const qm_topology *t)
{
    return !t ? "" : t->file[0] ? t->file : t->name;
}

const char *qm_topology_title(const qm_topology *t, char *buf, size_t cap)
{
    if (!t)
        snprintf(buf, cap, "(no scenario)");
    else if (!t->file[0] || strcmp(t->file, "<built-in>") == 0)
        snprintf(buf, cap, "%s (built-in simulated mesh)", t->name);
    else
        snprintf(buf, cap, "%s (%s)", t->name, t->file);
    return buf;
}

bool qm_topology_grow(void **array, int *cap, int need, size_t elem_bytes)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(*array, (size_t)c * elem_bytes);
    if (!q)
        return false;
    *array = q;
    *cap = c;
    return true;
}

const char *qm_topology_closest_gpu(const qm_topology *t, const char *id)
{
    const char *hint = NULL;
    int best = 3;
    for (int g = 0; t && id && g < t->n_gpus; ++g)
        if (qm_hint_closer(id, t->nodes[t->gpus[g]].id, &best, hint))
            hint = t->nodes[t->gpus[g]].id;
    return hint;
}
