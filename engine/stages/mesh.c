/* mesh.c — the mesh stage (see mesh.h). */
#include "mesh.h"
#include "status_internal.h"

#include <stdlib.h>
#include <string.h>

void qm_mesh_destroy(qm_mesh *mesh)
{
    if (!mesh)
        return;
    free(mesh->rank_first);
    free(mesh->devices);
    free(mesh);
}

static uint64_t node_memory(const qm_topology *t, const qm_node *n)
{
    if (n->memory_bytes)
        return n->memory_bytes;
    return n->type >= 0 && n->type < t->n_device_types ? t->device_types[n->type].memory_bytes : 0;
}

static double node_hbm(const qm_topology *t, const qm_node *n)
{
    if (n->hbm_bw_bytes_per_s > 0)
        return n->hbm_bw_bytes_per_s;
    return n->type >= 0 && n->type < t->n_device_types ? t->device_types[n->type].hbm_bw_bytes_per_s
                                                         : 0;
}

/* Every device of a rank must reach at least one other device of it, else E-DISCONNECTED
 * (docs/planner.md, "Devices and order"); pairs without a path are allowed (three devices joined
 * 0-1 and 1-2 but not 0-2 form a valid rank): they simply have no peer access. */
static qm_code check_reachable(const qm_topology *topo, qm_topo_graph *graph, const int *devs, int n,
                               qm_status *st)
{
    if (qm_topo_graph_uniform_hub(graph, devs, n, NULL, NULL))
        return QM_OK; /* every pair has a path (through one switch): no search per device */
    for (int i = 0; n > 1 && i < n; ++i) {
        bool any = false;
        for (int j = 0; j < n && !any; ++j) {
            qm_topo_path p;
            if (j == i)
                continue;
            qm_code rc = qm_topo_graph_path(graph, devs[i], devs[j], &p, st);
            if (rc != QM_OK)
                return rc;
            any = p.found;
        }
        if (!any)
            return qm_fail(st, QM_E_DISCONNECTED, "mesh: device %s has no path to any of the other "
                           "%d devices of its rank", topo->nodes[devs[i]].id, n - 1);
    }
    return QM_OK;
}

qm_code qm_mesh_create(const qm_topology *topo, qm_topo_graph *graph, int ranks, qm_mesh **out,
                       qm_status *st)
{
    qm_code rc = QM_OK;
    int *order = NULL;
    if (out)
        *out = NULL;
    if (!topo || !graph || !out)
        return qm_fail(st, QM_E_ARG, "mesh: topology, graph and out must not be NULL");
    if (ranks < 0 || ranks > topo->n_ranks)
        return qm_fail(st, QM_E_RANK, "mesh: %d ranks requested but the scenario has %d", ranks,
                       topo->n_ranks);
    if (topo->n_ranks < 1)
        return qm_fail(st, QM_E_RANK, "mesh: the scenario has no ranks (no host with a device)");
    const int nr = ranks ? ranks : topo->n_ranks;
    qm_mesh *m = calloc(1, sizeof *m);
    if (!m)
        return qm_fail(st, QM_E_NOMEM, "mesh: out of host memory");
    m->topo = topo;
    m->graph = graph;
    m->n_ranks = nr;
    m->rank_first = calloc((size_t)nr + 1, sizeof *m->rank_first);
    int total = 0;
    for (int r = 0; r < nr; ++r)
        total += topo->ranks[r].n_devices;
    m->devices = calloc((size_t)(total ? total : 1), sizeof *m->devices);
    order = malloc((size_t)(total ? total : 1) * sizeof *order);
    if (!m->rank_first || !m->devices || !order) {
        rc = qm_fail(st, QM_E_NOMEM, "mesh: out of host memory for %d devices", total);
        goto fail;
    }
    int k = 0;
    for (int r = 0; r < nr; ++r) {
        const qm_rank_desc *rd = &topo->ranks[r];
        m->rank_first[r] = k;
        if (rd->n_devices < 1) {
            rc = qm_fail(st, QM_E_RANK, "mesh: rank %d has no device", rd->rank);
            goto fail;
        }
        rc = check_reachable(topo, graph, rd->devices, rd->n_devices, st);
        if (rc == QM_OK)
            rc = qm_topo_graph_affinity_order(graph, rd->devices, rd->n_devices, order, st);
        if (rc != QM_OK) {
            qm_status_prefix(st, "mesh: rank %d", rd->rank);
            goto fail;
        }
        for (int i = 0; i < rd->n_devices; ++i) {
            const qm_node *n = &topo->nodes[order[i]];
            qm_mesh_device *d = &m->devices[k++];
            d->node = order[i];
            memcpy(d->id, n->id, sizeof d->id);
            d->rank = r;
            d->host = n->host;
            d->memory_bytes = node_memory(topo, n);
            d->usable_bytes = d->memory_bytes > n->reserve_bytes ? d->memory_bytes - n->reserve_bytes : 0;
            d->hbm_bw_bytes_per_s = node_hbm(topo, n);
        }
    }
    m->rank_first[nr] = k;
    m->n_devices = k;
    free(order);
    *out = m;
    return QM_OK;
fail:
    free(order);
    qm_mesh_destroy(m);
    return rc;
}

qm_code qm_mesh_best_connected(const qm_mesh *mesh, int first, int n, int *out, qm_status *st)
{
    if (n < 1 || first < 0 || first + n > mesh->n_devices)
        return qm_fail(st, QM_E_ARG, "mesh: device range [%d, %d) is outside the %d devices", first,
                       first + n, mesh->n_devices);
    /* a whole rank: its affinity order starts at its best-connected device (the earliest of the
     * best in given order, hence also the earliest in affinity order), so no matrix is needed;
     * the planner asks this for rank 0 on every layout */
    for (int r = 0; r < mesh->n_ranks; ++r)
        if (mesh->rank_first[r] == first && mesh->rank_first[r + 1] == first + n) {
            *out = first;
            return QM_OK;
        }
    int *nodes = calloc((size_t)n, sizeof *nodes), node = -1;
    if (!nodes)
        return qm_fail(st, QM_E_NOMEM, "mesh: out of host memory");
    for (int i = 0; i < n; ++i)
        nodes[i] = mesh->devices[first + i].node;
    qm_code rc = qm_topo_graph_best_connected(mesh->graph, nodes, n, &node, st);
    *out = first;
    for (int i = 0; rc == QM_OK && i < n; ++i)
        if (nodes[i] == node)
            *out = first + i;
    free(nodes);
    return rc;
}

int qm_mesh_find(const qm_mesh *mesh, const char *id)
{
    for (int i = 0; mesh && id && i < mesh->n_devices; ++i)
        if (strcmp(mesh->devices[i].id, id) == 0)
            return i;
    return -1;
}

qm_code qm_mesh_open_backend(const qm_mesh *mesh, int rank, const qm_backend_desc *base,
                             qm_hal **out, qm_status *st)
{
    qm_code rc = QM_OK;
    if (out)
        *out = NULL;
    if (!mesh || !out)
        return qm_fail(st, QM_E_ARG, "mesh: mesh and out must not be NULL");
    if (rank >= mesh->n_ranks)
        return qm_fail(st, QM_E_RANK, "mesh: rank %d is not below the %d ranks of the mesh", rank,
                       mesh->n_ranks);
    const int first = rank < 0 ? 0 : mesh->rank_first[rank];
    const int n = rank < 0 ? mesh->n_devices : mesh->rank_first[rank + 1] - first;
    qm_backend_desc desc = base ? *base : (qm_backend_desc){.kind = QM_BACKEND_SIM};
    if (desc.kind == QM_BACKEND_CUDA) {
        desc.cuda_devices = n;
        if ((rc = qm_backend_open(&desc, out, st)) == QM_OK && qm_hal_device_count(*out) < n) {
            rc = qm_fail(st, QM_E_ARG, "encode: the plan gives this process %d devices but %d CUDA "
                         "devices are visible; use a scenario with at most that many", n,
                         qm_hal_device_count(*out));
            qm_hal_destroy(*out);
            *out = NULL;
        }
        return rc;
    }
    qm_backend_device *dd = calloc((size_t)n, sizeof *dd);
    qm_backend_peer *pp = NULL;
    int np = 0, cap = 0;
    if (!dd)
        return qm_fail(st, QM_E_NOMEM, "mesh: out of host memory");
    for (int i = 0; i < n; ++i) {
        const qm_mesh_device *d = &mesh->devices[first + i];
        qm_topo_path p;
        double host_bw = 0;
        if (qm_topo_graph_ingest_path(mesh->graph, d->node, true, &p, st) == QM_OK && p.found)
            host_bw = p.bw_bytes_per_s;
        const int type = mesh->topo->nodes[d->node].type;
        dd[i] = (qm_backend_device){.id = d->id,
                                    .name = type >= 0 ? mesh->topo->device_types[type].name : "sim",
                                    .memory_bytes = d->memory_bytes,
                                    .reserve_bytes = d->memory_bytes - d->usable_bytes,
                                    .hbm_bw_bytes_per_s = d->hbm_bw_bytes_per_s,
                                    .host_bw_bytes_per_s = host_bw,
                                    .numa = mesh->topo->nodes[d->node].numa};
    }
    /* peers: devices of one host with a path (per host, so big meshes stay linear in hosts); a
     * host whose devices hang off one switch has every pair without a search per device */
    int run_end = 0;
    bool run_uniform = false;
    for (int i = 0; i < n && !desc.phantom; ++i) { /* phantom memory never copies: no peers */
        const qm_mesh_device *di = &mesh->devices[first + i];
        if (i >= run_end) {
            int *nodes = NULL;
            run_uniform = false;
            for (run_end = i; run_end < n && mesh->devices[first + run_end].host == di->host; ++run_end)
                ;
            if ((nodes = malloc((size_t)(run_end - i) * sizeof *nodes)) != NULL) {
                for (int k = i; k < run_end; ++k)
                    nodes[k - i] = mesh->devices[first + k].node;
                run_uniform = qm_topo_graph_uniform_hub(mesh->graph, nodes, run_end - i, NULL, NULL);
            }
            free(nodes);
        }
        for (int j = i + 1; j < n && mesh->devices[first + j].host == di->host; ++j) {
            qm_topo_path p = {.found = true};
            if (!(run_uniform && j < run_end) &&
                (rc = qm_topo_graph_path(mesh->graph, di->node, mesh->devices[first + j].node, &p,
                                         st)) != QM_OK)
                goto done;
            if (!p.found)
                continue;
            if (np == cap) {
                cap = cap ? 2 * cap : 64;
                qm_backend_peer *g = realloc(pp, (size_t)cap * sizeof *pp);
                if (!g) {
                    rc = qm_fail(st, QM_E_NOMEM, "mesh: out of host memory");
                    goto done;
                }
                pp = g;
            }
            pp[np++] = (qm_backend_peer){.a = i, .b = j};
        }
    }
    desc.n_devices = n;
    desc.devices = dd;
    desc.n_peers = np;
    desc.peers = pp;
    rc = qm_backend_open(&desc, out, st);
done:
    free(dd);
    free(pp);
    return rc;
}
