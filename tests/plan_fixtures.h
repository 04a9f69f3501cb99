/* plan_fixtures.h — scenarios written as YAML text in the tests, loaded, graphed and meshed by the
 * engine's pipeline. */
#ifndef QM_PLAN_FIXTURES_H
#define QM_PLAN_FIXTURES_H

#include "layout.h"
#include "pipeline.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

/* The scenario goes through the engine's pipeline (pipeline.h); t, g and m are its products. */
typedef struct fixture {
    qm_pipeline pl;
    qm_topology *t;
    qm_topo_graph *g;
    qm_mesh *m;
} fixture;

static inline bool fixture_load(fixture *f, const char *yaml, int ranks)
{
    qm_status st;
    qm_diags d;
    qm_diags_init(&d);
    qm_pipeline_init(&f->pl);
    bool ok = qm_pipeline_load_text(&f->pl, yaml, strlen(yaml), "fixture.yaml", &d, &st) == QM_OK &&
              qm_pipeline_mesh(&f->pl, ranks, &st) == QM_OK;
    if (!ok) {
        qm_diags_print(&d, stderr);
        fprintf(stderr, "fixture: %s\n", st.msg);
    }
    f->t = f->pl.topology;
    f->g = f->pl.graph;
    f->m = f->pl.mesh;
    qm_diags_fini(&d);
    return ok;
}

static inline void fixture_free(fixture *f)
{
    qm_pipeline_fini(&f->pl);
}

/* One host, `n` GPUs with the given ids, memory and HBM, all on numa0 behind PCIe, and on one
 * NVSwitch fabric when nvswitch is true. Written into buf. */
static inline const char *fixture_box(char *buf, size_t cap, int n, const char *const *ids,
                                      const char *memory, bool nvswitch)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k,
                          "schema: qmesh/1\nname: box\nsources: [test]\n"
                          "hosts:\n  - id: n0\n    memory: 2 TiB\n    numa: [{id: 0}]\n    devices:\n");
    for (int i = 0; i < n; ++i)
        k += (size_t)snprintf(buf + k, cap - k,
                              "      - {id: %s, memory: %s, hbm_bandwidth: 4 TB/s, numa: 0}\n",
                              ids[i], memory);
    if (nvswitch) {
        k += (size_t)snprintf(buf + k, cap - k, "    switches:\n      - {id: n0.nvs, kind: nvswitch}\n");
    }
    k += (size_t)snprintf(buf + k, cap - k, "links:\n");
    for (int i = 0; i < n; ++i)
        k += (size_t)snprintf(buf + k, cap - k,
                              "  - {a: n0.numa0, b: %s, kind: pcie, bandwidth: 50 GB/s, latency: 1 us}\n",
                              ids[i]);
    if (nvswitch) {
        k += (size_t)snprintf(buf + k, cap - k,
                              "fabrics:\n  - {id: n0.nvl, kind: nvlink, switch: n0.nvs, members: [");
        for (int i = 0; i < n; ++i)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", ids[i]);
        k += (size_t)snprintf(buf + k, cap - k, "], port_bandwidth: 450 GB/s, latency: 0.9 us}\n");
    }
    return buf;
}

/* Plan a request with the given qubits / dtype / policy (other fields default) on the fixture's
 * mesh, through the pipeline (validate, plan); the caller owns the plan (qm_plan_destroy). */
static inline qm_plan *fixture_plan(fixture *f, unsigned q, qm_dtype dt, qm_policy pol,
                                    qm_code *rc, qm_status *st)
{
    qm_request r;
    qm_request_init(&r);
    r.qubits = q;
    r.dtype = dt;
    r.policy = pol;
    r.ranks = f->pl.mesh_ranks;
    *rc = qm_pipeline_plan(&f->pl, &r, st);
    qm_plan *p = f->pl.plan;
    f->pl.plan = NULL; /* taken */
    return p;
}

#endif
