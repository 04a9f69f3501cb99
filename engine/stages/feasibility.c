/* feasibility.c — the feasibility stage: per device, planned shard bytes + staging (+ the IQP
 * exchange scratch, plan_iqp.c) <= usable; on the materialized simulator, per host, the memory its
 * simulated devices, the host staging and the output assembly take <= the host's memory (and, in
 * one process, their sum <= this machine's MemAvailable).
 *
 * In: a plan with shards. Out: per-device accounting (shard, staging, planned, usable, input
 * bytes) and, when a device is over, E-CAPACITY naming the shard, the device, the bytes needed and
 * usable (the frontier hint is added by plan.c); per-host accounting and E-CAPACITY naming the
 * host. Also the gather target and its feasibility.
 * Must not: allocate device memory, read the machine (MemAvailable comes in the mesh's budget).
 */
#include "feasibility.h"
#include "status_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

qm_code qm_feasibility_check(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    const uint64_t is = qm_dtype_size(p->request.dtype) / 2; /* float32 for complex64, float64 */
    p->host_over = false;
    for (int d = 0; d < mesh->n_devices; ++d) {
        p->devices[d] = (qm_plan_device){.usable_bytes = mesh->devices[d].usable_bytes};
    }
    for (int i = 0; i < p->n_shards; ++i) {
        qm_plan_device *pd = &p->devices[p->shards[i].device];
        pd->shard_bytes += p->shards[i].bytes;
        pd->input_bytes += p->shards[i].input_elems * is;
    }
    int worst = -1, worst_shard = -1;
    uint64_t worst_over = 0;
    for (int d = 0; d < mesh->n_devices; ++d) {
        qm_plan_device *pd = &p->devices[d];
        const uint64_t stage_cap = 2 * QM_STAGING_CHUNK_BYTES;
        pd->staging_bytes = pd->input_bytes < stage_cap ? pd->input_bytes : stage_cap;
        pd->scratch_bytes = qm_plan_iqp_scratch_bytes(p, d);
        pd->planned_bytes = pd->shard_bytes + pd->staging_bytes + pd->scratch_bytes;
        if (pd->planned_bytes > pd->usable_bytes) {
            uint64_t over = pd->planned_bytes - pd->usable_bytes;
            if (worst < 0 || over > worst_over) {
                worst = d;
                worst_over = over;
            }
        }
    }
    p->feasible = worst < 0;
    if (p->feasible)
        return QM_OK;
    for (int i = 0; i < p->n_shards; ++i)
        if (p->shards[i].device == worst) {
            worst_shard = i;
            break;
        }
    const qm_plan_device *pd = &p->devices[worst];
    char need[32], stage[32], usable[32], scratch[64] = "";
    if (pd->scratch_bytes) {
        char b[32];
        snprintf(scratch, sizeof scratch, " + %s exchange scratch",
                 qm_format_bytes(pd->scratch_bytes, b, sizeof b));
    }
    p->error.code = QM_E_CAPACITY;
    snprintf(p->error.msg, sizeof p->error.msg,
             "feasibility: shard %d needs %s (+ %s staging%s) on %s but %s is usable", worst_shard,
             qm_format_bytes(pd->shard_bytes, need, sizeof need),
             qm_format_bytes(pd->staging_bytes, stage, sizeof stage), scratch,
             mesh->devices[worst].id, qm_format_bytes(pd->usable_bytes, usable, sizeof usable));
    if (st)
        *st = p->error;
    return QM_E_CAPACITY;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    uint64_t s;
    return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

/* "X of host memory (+ Y staging + Z output assembly)" of one host's (or every host's) sums. */
static const char *host_need_text(const qm_plan_host *h, char *out, size_t n)
{
    char a[32], b[32], c[32];
    snprintf(out, n, "%s of host memory (+ %s staging + %s output assembly)",
             qm_format_bytes(h->device_bytes, a, sizeof a),
             qm_format_bytes(h->staging_bytes, b, sizeof b),
             qm_format_bytes(h->output_bytes, c, sizeof c));
    return out;
}

qm_code qm_feasibility_host_check(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    const qm_host_budget *hb = &mesh->host_budget;
    const qm_topology *t = mesh->topo;
    p->host_checked = hb->sim && t && p->n_hosts == t->n_hosts && p->n_hosts > 0;
    p->local_planned_bytes = 0;
    if (!p->host_checked)
        return QM_OK;
    for (int h = 0; h < p->n_hosts; ++h)
        p->hosts[h] = (qm_plan_host){.memory_bytes = t->hosts[h].memory_bytes};
    for (int d = 0; d < mesh->n_devices; ++d) {
        qm_plan_host *ph = &p->hosts[mesh->devices[d].host];
        ph->device_bytes = add_sat(ph->device_bytes, p->devices[d].planned_bytes);
        ph->staging_bytes = add_sat(ph->staging_bytes, p->devices[d].staging_bytes);
    }
    p->hosts[mesh->devices[0].host].output_bytes =
        QM_READBACK_AMPS * qm_dtype_size(p->request.dtype);
    qm_plan_host all = {0};
    int worst = -1;
    uint64_t worst_over = 0;
    for (int h = 0; h < p->n_hosts; ++h) {
        qm_plan_host *ph = &p->hosts[h];
        ph->planned_bytes = add_sat(add_sat(ph->device_bytes, ph->staging_bytes), ph->output_bytes);
        all.device_bytes = add_sat(all.device_bytes, ph->device_bytes);
        all.staging_bytes = add_sat(all.staging_bytes, ph->staging_bytes);
        all.output_bytes = add_sat(all.output_bytes, ph->output_bytes);
        all.planned_bytes = add_sat(all.planned_bytes, ph->planned_bytes);
        if (ph->memory_bytes && ph->planned_bytes > ph->memory_bytes &&
            (worst < 0 || ph->planned_bytes - ph->memory_bytes > worst_over)) {
            worst = h;
            worst_over = ph->planned_bytes - ph->memory_bytes;
        }
    }
    p->local_planned_bytes = all.planned_bytes;
    char need[160], have[32];
    if (worst >= 0) {
        p->feasible = false;
        p->error.code = QM_E_CAPACITY;
        snprintf(p->error.msg, sizeof p->error.msg, "feasibility: the simulated devices of host %s "
                 "need %s but %s has %s", t->hosts[worst].id,
                 host_need_text(&p->hosts[worst], need, sizeof need), t->hosts[worst].id,
                 qm_format_bytes(p->hosts[worst].memory_bytes, have, sizeof have));
    } else if (hb->available_bytes && all.planned_bytes > hb->available_bytes) {
        p->feasible = false;
        p->error.code = QM_E_CAPACITY;
        snprintf(p->error.msg, sizeof p->error.msg, "feasibility: the simulated devices of this "
                 "process need %s but this machine has %s available (MemAvailable)",
                 host_need_text(&all, need, sizeof need),
                 qm_format_bytes(hb->available_bytes, have, sizeof have));
    } else {
        return QM_OK;
    }
    p->host_over = true;
    if (st)
        *st = p->error;
    return QM_E_CAPACITY;
}

/* Host memory of rank 0's host; 0 when the scenario does not give it. */
static uint64_t host_memory(const qm_mesh *mesh)
{
    int h = mesh->devices[0].host;
    return h >= 0 && h < mesh->topo->n_hosts ? mesh->topo->hosts[h].memory_bytes : 0;
}

qm_code qm_gather_plan(const qm_mesh *mesh, qm_plan *p, qm_status *st)
{
    qm_plan_gather *g = &p->gather;
    const char *want = p->request.gather[0] ? p->request.gather : "auto";
    char need[32], have[32];
    g->device = -1;
    g->requested = strcmp(want, "none") != 0;
    if (!g->requested) {
        g->feasible = false;
        snprintf(g->target, sizeof g->target, "none");
        snprintf(g->reason, sizeof g->reason, "not requested");
        return QM_OK;
    }
    if (strcmp(want, "host") == 0) {
        uint64_t mem = host_memory(mesh);
        snprintf(g->target, sizeof g->target, "host");
        g->feasible = mem >= p->state_bytes;
        if (mem == 0)
            snprintf(g->reason, sizeof g->reason, "the scenario gives no memory for host %s",
                     mesh->topo->hosts[mesh->devices[0].host].id);
        else
            snprintf(g->reason, sizeof g->reason, "%s state %s %s of host memory",
                     qm_format_bytes(p->state_bytes, need, sizeof need),
                     g->feasible ? "fits in" : "exceeds", qm_format_bytes(mem, have, sizeof have));
        return QM_OK;
    }
    int dev;
    if (strcmp(want, "auto") == 0) {
        /* the best-connected device of rank 0 */
        qm_code rc = qm_mesh_best_connected(mesh, 0, mesh->rank_first[1], &dev, st);
        if (rc != QM_OK)
            return rc;
    } else {
        dev = qm_mesh_find(mesh, want);
        if (dev < 0)
            return qm_fail(st, QM_E_NO_GATHER, "gather: target '%s' is not a device of this mesh "
                           "(%d devices, first '%s'); use auto, host, none or a device id", want,
                           mesh->n_devices, mesh->devices[0].id);
    }
    g->device = dev;
    snprintf(g->target, sizeof g->target, "%s", mesh->devices[dev].id);
    const qm_plan_device *pd = &p->devices[dev];
    /* the device keeps its own shard and needs room for the rest of the state */
    uint64_t extra = p->state_bytes > pd->shard_bytes ? p->state_bytes - pd->shard_bytes : 0;
    if (p->policy == QM_POLICY_REPLICATED)
        extra = 0;
    uint64_t free_b = pd->usable_bytes > pd->planned_bytes ? pd->usable_bytes - pd->planned_bytes : 0;
    g->feasible = extra <= free_b;
    snprintf(g->reason, sizeof g->reason, "%s beyond its own shard %s %s free on %s",
             qm_format_bytes(extra, need, sizeof need), g->feasible ? "fits in" : "exceeds",
             qm_format_bytes(free_b, have, sizeof have), g->target);
    return QM_OK;
}
