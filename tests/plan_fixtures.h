/* plan_fixtures.h — scenarios written as YAML text in the tests, loaded, graphed and meshed. */
#ifndef QM_PLAN_FIXTURES_H
#define QM_PLAN_FIXTURES_H

#include "layout.h"
#include "plan.h"
#include "scenario_loader.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct fixture {
    qm_topology *t;
    qm_topo_graph *g;
    qm_mesh *m;
} fixture;

static inline bool fixture_load(fixture *f, const char *yaml, int ranks)
{
    qm_status st;
    qm_diags d;
    qm_diags_init(&d);
    f->t = NULL;
    f->g = NULL;
    f->m = NULL;
    bool ok = qm_scenario_load_string(yaml, strlen(yaml), "fixture.yaml", &f->t, &d, &st) == QM_OK &&
              qm_topo_graph_create(f->t, &f->g, &st) == QM_OK &&
              qm_mesh_create(f->t, f->g, ranks, &f->m, &st) == QM_OK;
    if (!ok) {
        qm_diags_print(&d, stderr);
        fprintf(stderr, "fixture: %s\n", st.msg);
    }
    qm_diags_fini(&d);
    return ok;
}

static inline void fixture_free(fixture *f)
{
    qm_mesh_destroy(f->m);
    qm_topo_graph_destroy(f->g);
    qm_topology_destroy(f->t);
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

/* Plan a request with the given qubits / dtype / policy (other fields default). */
static inline qm_plan *fixture_plan(const fixture *f, unsigned q, qm_dtype dt, qm_policy pol,
                                    qm_code *rc, qm_status *st)
{
    qm_request r;
    qm_request_init(&r);
    r.qubits = q;
    r.dtype = dt;
    r.policy = pol;
    qm_plan *p = NULL;
    *rc = qm_plan_create(f->m, &r, &p, st);
    return p;
}

#endif
