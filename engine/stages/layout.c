/* layout.c — the layout stage (see layout.h). Ranks own contiguous ranges by construction (the
 * mesh orders devices rank by rank); this file checks the world the plan is used in, lists a
 * rank's shards by shard id, never by position in some local list, and projects them onto the
 * rank's backend devices (the only place a mesh device index becomes a backend one). */
#include "layout.h"
#include "status_internal.h"

#include <stdlib.h>

void qm_layout_destroy(qm_layout *layout)
{
    if (!layout)
        return;
    free(layout->local_shards);
    free(layout->specs);
    free(layout);
}

/* The shards of `rank` (-1: all) in shard id order, projected onto the rank's own devices. */
static qm_code project(const qm_plan *plan, const qm_mesh *mesh, int rank, int world_size,
                       qm_layout **out, qm_status *st)
{
    if (!plan->feasible)
        return qm_fail(st, plan->error.code, "layout: the plan is not feasible: %s", plan->error.msg);
    const size_t cap = (size_t)(plan->n_shards ? plan->n_shards : 1);
    qm_layout *l = calloc(1, sizeof *l);
    if (l) {
        l->local_shards = calloc(cap, sizeof *l->local_shards);
        l->specs = calloc(cap, sizeof *l->specs);
    }
    if (!l || !l->local_shards || !l->specs) {
        qm_layout_destroy(l);
        return qm_fail(st, QM_E_NOMEM, "layout: out of host memory");
    }
    l->rank = rank;
    l->world_size = world_size;
    l->first_device = rank < 0 ? 0 : mesh->rank_first[rank];
    l->n_devices = rank < 0 ? mesh->n_devices : mesh->rank_first[rank + 1] - l->first_device;
    bool first = true;
    for (int i = 0; i < plan->n_shards; ++i) {
        const qm_plan_shard *s = &plan->shards[i];
        if (rank >= 0 && s->rank != rank)
            continue;
        l->specs[l->n_local] = (qm_shard_spec){.rank = s->rank, .device = s->device - l->first_device,
                                               .start = s->start, .end = s->end};
        l->local_shards[l->n_local++] = i;
        if (first) {
            l->start = s->start;
            first = false;
        } else if (s->start != l->end && plan->policy != QM_POLICY_REPLICATED) {
            qm_layout_destroy(l);
            return qm_fail(st, QM_E_INTERNAL, "layout: rank %d owns a non-contiguous range (shard "
                           "%d starts at %llu after %llu)", rank, i, (unsigned long long)s->start,
                           (unsigned long long)l->end);
        }
        if (s->end > l->end)
            l->end = s->end;
    }
    *out = l;
    return QM_OK;
}

qm_code qm_layout_create(const qm_plan *plan, const qm_mesh *mesh, int rank, int world_size,
                         qm_layout **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!plan || !mesh || !out)
        return qm_fail(st, QM_E_ARG, "layout: plan, mesh and out must not be NULL");
    if (world_size < 1)
        return qm_fail(st, QM_E_RANK, "layout: world size must be at least 1 (got %d)", world_size);
    if (rank < 0 || rank >= world_size)
        return qm_fail(st, QM_E_RANK, "layout: rank %d is not below the world size %d", rank,
                       world_size);
    if (world_size != mesh->n_ranks)
        return qm_fail(st, QM_E_RANK, "layout: the plan was made for %d ranks but the world size "
                       "is %d", mesh->n_ranks, world_size);
    return project(plan, mesh, rank, world_size, out, st);
}

qm_code qm_layout_create_all(const qm_plan *plan, const qm_mesh *mesh, qm_layout **out,
                             qm_status *st)
{
    if (out)
        *out = NULL;
    if (!plan || !mesh || !out)
        return qm_fail(st, QM_E_ARG, "layout: plan, mesh and out must not be NULL");
    return project(plan, mesh, -1, 1, out, st);
}

qm_code qm_layout_shard(const qm_plan *plan, int shard, qm_plan_shard *out, qm_status *st)
{
    if (!plan || !out)
        return qm_fail(st, QM_E_ARG, "layout: plan and out must not be NULL");
    if (shard < 0 || shard >= plan->n_shards)
        return qm_fail(st, QM_E_ARG, "layout: shard %d is out of range (the plan has %d shards)",
                       shard, plan->n_shards);
    *out = plan->shards[shard];
    return QM_OK;
}

int qm_layout_host_first_device(const uint64_t *host_ids, const int *rank_first, int world_size,
                                int rank)
{
    if (!host_ids || !rank_first || rank < 0 || rank >= world_size)
        return 0;
    int first = 0;
    for (int r = 0; r < rank; ++r)
        if (host_ids[r] == host_ids[rank])
            first += rank_first[r + 1] - rank_first[r];
    return first;
}
