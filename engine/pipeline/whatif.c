/* whatif.c — `qmesh whatif` (see whatif.h): variants of a scenario built in memory and planned
 * through the pipeline, one row per variant and dtype.
 *
 * In: a topology, a spec. Out: rows. The unmodified scenario is planned on the loaded topology
 * itself; every other variant on a topology from qm_topology_variant, destroyed after its rows
 * are filled. With spec->max, each dtype's largest state (qm_plan_frontier on the variant's mesh)
 * is planned; the plan itself then reports the same frontier. When no state fits, a one-qubit
 * plan is made for its error (a policy the variant cannot meet, or the capacity), and the row
 * says qubits 0.
 * Must not: print, generate YAML text, or change the source topology.
 */
#include "whatif.h"
#include "pipeline.h"
#include "status_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int count_or_one(int n) { return n > 0 ? n : 1; }

/* The rows of one variant (vt: its topology, the source for the unmodified one). */
static void plan_variant(const qm_topology *vt, const qm_whatif_spec *spec, qm_whatif_row *rows)
{
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    qm_pipeline_use(&pl, vt);
    qm_status st;
    qm_status_clear(&st);
    qm_code rc = qm_pipeline_mesh(&pl, 0, &st);
    if (rc == QM_OK) {
        const qm_mesh *m = pl.mesh;
        int hosts = 0; /* hosts with a device (mesh order keeps a host's devices together) */
        for (int d = 0; d < m->n_devices; ++d)
            hosts += d == 0 || m->devices[d].host != m->devices[d - 1].host;
        for (int k = 0; k < spec->n_dtypes; ++k) {
            qm_whatif_row *r = &rows[k];
            r->built = true;
            r->hosts = hosts;
            r->devices = m->n_devices;
            for (int d = 0; d < m->n_devices; ++d) {
                r->memory_bytes += m->devices[d].memory_bytes;
                r->usable_bytes += m->devices[d].usable_bytes;
            }
        }
        rc = qm_pipeline_mesh(&pl, spec->request.ranks, &st);
    }
    if (rc != QM_OK) {
        for (int k = 0; k < spec->n_dtypes; ++k)
            rows[k].error = st;
        qm_pipeline_fini(&pl);
        return;
    }
    unsigned frontier[2] = {0, 0};
    if (spec->max)
        qm_plan_frontier(pl.mesh, &spec->request, frontier);
    for (int k = 0; k < spec->n_dtypes; ++k) {
        qm_whatif_row *r = &rows[k];
        qm_request q = spec->request;
        q.dtype = r->dtype;
        const int dk = q.dtype == QM_DTYPE_COMPLEX128 ? 1 : 0;
        /* nothing fits: the plan of one qubit says why (the policy's or the capacity's error) */
        if (spec->max)
            q.qubits = frontier[dk] ? frontier[dk] : 1;
        qm_status_clear(&st);
        (void)qm_pipeline_plan(&pl, &q, &st);
        const qm_plan *p = pl.plan;
        if (!p) {
            r->error = st;
            continue;
        }
        r->planned = true;
        r->qubits = spec->max ? frontier[dk] : q.qubits;
        r->max_qubits = p->max_qubits[dk];
        r->feasible = p->feasible && r->qubits > 0;
        r->error = p->error;
        r->policy = p->policy;
        r->shards = p->n_shards;
        for (int e = 0; e < QM_PHASE_COUNT_; ++e) {
            r->estimate_set[e] = p->has_estimates && p->estimate_set[e];
            r->estimates_s[e] = r->estimate_set[e] ? p->estimates_s[e] : 0;
        }
    }
    qm_pipeline_fini(&pl);
}

qm_code qm_whatif_run(const qm_topology *t, const qm_whatif_spec *spec, qm_whatif_row **rows_out,
                      int *n_rows, qm_status *st)
{
    *rows_out = NULL;
    *n_rows = 0;
    const int nh = count_or_one(spec->n_hosts), nd = count_or_one(spec->n_devices_per_host),
              nm = count_or_one(spec->n_device_memory), nw = count_or_one(spec->n_without);
    const bool varied = spec->n_hosts || spec->n_devices_per_host || spec->n_device_memory ||
                        spec->n_without;
    /* rows: (1 + variants) x dtypes, bounded before anything is multiplied out */
    long long variants = varied ? 1 : 0;
    const int lens[4] = {nh, nd, nm, nw};
    for (int i = 0; i < 4 && varied; ++i)
        variants = variants * lens[i] > QM_WHATIF_MAX_ROWS ? QM_WHATIF_MAX_ROWS + 1
                                                           : variants * lens[i];
    const long long total = (1 + variants) * spec->n_dtypes;
    if (spec->n_dtypes < 1 || total > QM_WHATIF_MAX_ROWS)
        return qm_fail(st, QM_E_ARG, "whatif: the variations give %s%lld rows (at most %d); "
                       "give shorter lists", variants > QM_WHATIF_MAX_ROWS ? "more than " : "",
                       total, QM_WHATIF_MAX_ROWS);
    /* a request no variant can plan is the command's error, not a row's (ranks: per variant) */
    for (int k = 0; k < spec->n_dtypes; ++k) {
        qm_request q = spec->request;
        q.dtype = spec->dtypes[k];
        if (spec->max)
            q.qubits = q.features ? qm_qubits_for_values(q.features) : 1;
        qm_code rc = qm_request_validate(&q, INT_MAX, st);
        if (rc != QM_OK) {
            qm_status_prefix(st, "whatif");
            return rc;
        }
    }
    qm_whatif_row *rows = calloc((size_t)total, sizeof *rows);
    bool *built_w = calloc((size_t)nw, sizeof *built_w);    /* per --without item: built once */
    qm_status *fail_w = calloc((size_t)nw, sizeof *fail_w); /* and its first failure */
    if (!rows || !built_w || !fail_w) {
        free(rows);
        free(built_w);
        free(fail_w);
        return qm_fail(st, QM_E_NOMEM, "whatif: out of host memory for %lld rows", total);
    }
    for (long long i = 0; i < total; ++i) {
        rows[i].without = -1;
        rows[i].dtype = spec->dtypes[i % spec->n_dtypes];
    }
    for (int k = 0; k < spec->n_dtypes; ++k)
        rows[k].base = true;
    plan_variant(t, spec, rows);
    qm_status first_fail;
    qm_status_clear(&first_fail);
    int n_built = 0;
    qm_whatif_row *r = rows + spec->n_dtypes;
    for (int ih = 0; varied && ih < nh; ++ih)
        for (int id = 0; id < nd; ++id)
            for (int im = 0; im < nm; ++im)
                for (int iw = 0; iw < nw; ++iw, r += spec->n_dtypes) {
                    qm_variant v = {0};
                    v.hosts = spec->n_hosts ? spec->hosts[ih] : 0;
                    v.devices_per_host = spec->n_devices_per_host ? spec->devices_per_host[id] : 0;
                    v.device_memory_bytes = spec->n_device_memory ? spec->device_memory_bytes[im] : 0;
                    if (spec->n_without) {
                        v.n_without = spec->without[iw].n;
                        v.without = (const char(*)[QM_ID_BYTES])spec->without[iw].ids;
                    }
                    for (int k = 0; k < spec->n_dtypes; ++k) {
                        r[k].variant = v;
                        r[k].without = spec->n_without ? iw : -1;
                    }
                    qm_topology *vt = NULL;
                    qm_status vst;
                    qm_status_clear(&vst);
                    if (qm_topology_variant(t, &v, &vt, &vst) != QM_OK) {
                        for (int k = 0; k < spec->n_dtypes; ++k)
                            r[k].error = vst;
                        if (fail_w[iw].code == QM_OK)
                            fail_w[iw] = vst;
                        if (first_fail.code == QM_OK)
                            first_fail = vst;
                        continue;
                    }
                    built_w[iw] = true;
                    n_built++;
                    plan_variant(vt, spec, r);
                    qm_topology_destroy(vt);
                }
    /* a variation that can be made in no variant is a usage error */
    qm_code rc = QM_OK;
    for (int iw = 0; varied && iw < nw && rc == QM_OK; ++iw)
        if (!built_w[iw] && fail_w[iw].code == QM_E_ARG) {
            if (st)
                *st = fail_w[iw];
            rc = QM_E_ARG;
        }
    if (rc == QM_OK && varied && n_built == 0 && first_fail.code == QM_E_ARG) {
        if (st)
            *st = first_fail;
        rc = QM_E_ARG;
    }
    free(built_w);
    free(fail_w);
    if (rc != QM_OK) {
        free(rows);
        return rc;
    }
    *rows_out = rows;
    *n_rows = (int)total;
    return QM_OK;
}
