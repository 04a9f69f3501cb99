/* test_whatif.c — a 45-qubit what-if: plan a 2^45-amplitude complex64 state (256 TiB) on a
 * generated 256-host x 8-GPU H200 cluster, then account every planned shard on a phantom
 * simulated mesh built from the same scenario — nothing is allocated for the state. */
#include "plan.h"
#include "scenario_loader.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

static char *cluster_yaml(int hosts)
{
    size_t cap = (size_t)hosts * 2048 + 4096, k = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    k += (size_t)snprintf(b + k, cap - k,
                          "schema: qmesh/1\nname: whatif\nsources: [test]\n"
                          "defaults: {reserve: 1 GiB}\n"
                          "device_types:\n  - {name: h200, memory: 143771 MiB, hbm_bandwidth: 4.8 TB/s}\n"
                          "hosts:\n");
    for (int h = 0; h < hosts; ++h) {
        k += (size_t)snprintf(b + k, cap - k, "  - id: n%d\n    memory: 2 TiB\n    numa: [{id: 0}]\n"
                              "    devices:\n", h);
        for (int g = 0; g < 8; ++g)
            k += (size_t)snprintf(b + k, cap - k, "      - {id: n%d.g%d, type: h200, numa: 0}\n", h, g);
        k += (size_t)snprintf(b + k, cap - k,
                              "    switches: [{id: n%d.nvs, kind: nvswitch}]\n"
                              "    nics: [{id: n%d.ib, speed: 400 Gb/s, numa: 0}]\n", h, h);
    }
    k += (size_t)snprintf(b + k, cap - k, "links:\n");
    for (int h = 0; h < hosts; ++h)
        for (int g = 0; g < 8; ++g)
            k += (size_t)snprintf(b + k, cap - k,
                                  "  - {a: n%d.numa0, b: n%d.g%d, kind: pcie, bandwidth: 55 GB/s}\n", h, h, g);
    k += (size_t)snprintf(b + k, cap - k, "fabrics:\n");
    for (int h = 0; h < hosts; ++h)
        k += (size_t)snprintf(b + k, cap - k,
                              "  - {id: n%d.nvl, kind: nvlink, switch: n%d.nvs, members: [n%d.g0, n%d.g1, "
                              "n%d.g2, n%d.g3, n%d.g4, n%d.g5, n%d.g6, n%d.g7], port_bandwidth: 450 GB/s}\n",
                              h, h, h, h, h, h, h, h, h, h);
    k += (size_t)snprintf(b + k, cap - k, "  - {id: ib, kind: net, port_bandwidth: 50 GB/s, members: [");
    for (int h = 0; h < hosts; ++h)
        k += (size_t)snprintf(b + k, cap - k, "%sn%d.ib", h ? ", " : "", h);
    k += (size_t)snprintf(b + k, cap - k, "]}\n");
    return b;
}

int main(void)
{
    qm_status st;
    char *yaml = cluster_yaml(256);
    qm_topology *t = NULL;
    qm_topo_graph *g = NULL;
    qm_mesh *m = NULL;
    qm_plan *p = NULL;
    qm_hal *hal = NULL;
    CHECK(yaml != NULL);
    CHECK_OK(qm_scenario_load_string(yaml, strlen(yaml), "whatif.yaml", &t, NULL, &st));
    if (st.code)
        fprintf(stderr, "%s:%d:%d %s\n", st.file, st.line, st.col, st.msg);
    CHECK_OK(qm_topo_graph_create(t, &g, &st));
    CHECK_OK(qm_mesh_create(t, g, 0, &m, &st));
    if (!m)
        return qm_test_end("test_whatif");
    CHECK_EQ_U64(m->n_devices, 2048);
    CHECK_EQ_U64(m->n_ranks, 256);
    qm_request r;
    qm_request_init(&r);
    r.qubits = 45;
    const uint64_t rss0 = qm_test_rss_bytes();
    CHECK_OK(qm_plan_create(m, &r, &p, &st));
    CHECK(p && p->feasible);
    if (p) {
        CHECK_EQ_U64(p->n_shards, 2048);
        CHECK_EQ_U64(p->shards[0].bytes, (uint64_t)128 << 30); /* 2^48 B / 2048 */
        CHECK_EQ_U64(p->shards[2047].end, (uint64_t)1 << 45);
        CHECK_EQ_U64(p->shards[8].rank, 1);
        CHECK_EQ_U64(p->max_qubits[0], 45);
        CHECK_EQ_U64(p->max_qubits[1], 44);
        /* account the plan on phantom devices: 256 TiB in use, nothing resident */
        CHECK_OK(qm_mesh_open_backend(m, -1, &(qm_backend_desc){.phantom = true}, &hal, &st));
        qm_hal_buf **bufs = calloc((size_t)p->n_shards, sizeof *bufs);
        for (int i = 0; hal && bufs && i < p->n_shards; ++i)
            CHECK_OK(qm_hal_buf_alloc(hal, p->shards[i].device, p->shards[i].bytes, &bufs[i], &st));
        CHECK_EQ_U64(qm_hal_bytes_in_use(hal), (uint64_t)1 << 48);
        const uint64_t rss1 = qm_test_rss_bytes();
        printf("what-if: 45 qubits complex64 on 2048 H200s: %d shards of 128 GiB; resident %llu -> "
               "%llu bytes\n", p->n_shards, (unsigned long long)rss0, (unsigned long long)rss1);
        CHECK(rss1 < rss0 + ((uint64_t)256 << 20));
        for (int i = 0; bufs && i < p->n_shards; ++i)
            qm_hal_buf_free(hal, bufs[i]);
        CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
        free(bufs);
    }
    qm_hal_destroy(hal);
    qm_plan_destroy(p);
    qm_mesh_destroy(m);
    qm_topo_graph_destroy(g);
    qm_topology_destroy(t);
    free(yaml);
    return qm_test_end("test_whatif");
}
