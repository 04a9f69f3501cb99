/* test_conformance_topology.c — the reference system's topology behaviours (items 1 and 4 of the
 * conformance tests) on the topology graph.
 *
 * Item 1: a topology of n devices has itself as the best link on the diagonal; unknown pairs have no
 * peer access. Item 4: the gather device is the best-connected one; on T3 (3 devices; 0<->1 through
 * a PCIe switch, 1<->2 through their NUMA node, 0<->2 nothing) the gather device is 1 and the order
 * [1, 0, 2]; with device ids [10, 11, 12] the answer is id 11 and [11, 10, 12] (the reference
 * returned 10: it looked up a position computed in one ordering inside another).
 * Here a device id is the GPU's node index in the topology, so T3 is built with its GPUs at node
 * indices equal to the ids (other nodes fill the indices below).
 */
#include "testlib.h"
#include "topology.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct t3 {
    qm_topology t;
    qm_host hosts[1];
    qm_node nodes[32];
    qm_link links[8];
    int gpus[3];
} t3;

static void put_node(t3 *b, int at, const char *id, qm_node_kind kind, int numa)
{
    qm_node *n = &b->nodes[at];
    memset(n, 0, sizeof *n);
    snprintf(n->id, sizeof n->id, "%s", id);
    n->kind = kind;
    n->host = 0;
    n->numa = numa;
    n->type = -1;
    n->attach = -1;
}

static void add_link(t3 *b, int a, int bb, double bw)
{
    b->links[b->t.n_links++] = (qm_link){.a = a, .b = bb, .cls = QM_LINK_PCIE,
                                         .bw_ab_bytes_per_s = bw, .bw_ba_bytes_per_s = bw,
                                         .latency_s = -1, .fabric = -1};
}

/* T3 with its three GPUs at node indices ids[0..2] (named "g<id>"). Device 0 and 1 sit under one
 * PCIe switch (32 GB/s links, nothing above the switch); devices 1 and 2 hang off NUMA node 0
 * (24 GB/s links, PHB-like); device 0 has no path to device 2 (GPUs do not forward). */
static void build_t3(t3 *b, const int ids[3])
{
    memset(b, 0, sizeof *b);
    snprintf(b->t.name, sizeof b->t.name, "T3");
    b->t.hosts = b->hosts;
    b->t.nodes = b->nodes;
    b->t.links = b->links;
    b->t.n_hosts = 1;
    snprintf(b->hosts[0].id, sizeof b->hosts[0].id, "h0");
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
        b->t.efficiency[c] = 1;
        b->t.latency_s[c] = 1e-6;
    }
    b->t.hbm_efficiency = 1;
    int max_id = ids[0] > ids[1] ? ids[0] : ids[1];
    max_id = max_id > ids[2] ? max_id : ids[2];
    b->t.n_nodes = max_id + 1 < 5 ? 5 : max_id + 1;
    bool used[32] = {false};
    for (int k = 0; k < 3; ++k)
        used[ids[k]] = true;
    int numa = -1, sw = -1, pad = 0;
    for (int i = 0; i < b->t.n_nodes; ++i) {
        if (used[i])
            continue;
        if (numa < 0) {
            numa = i;
            put_node(b, i, "h0.numa0", QM_NODE_NUMA, -1);
        } else if (sw < 0) {
            sw = i;
            put_node(b, i, "h0.sw0", QM_NODE_PCIE_SWITCH, -1);
        } else {
            char id[32];
            snprintf(id, sizeof id, "h0.pad%d", pad++);
            put_node(b, i, id, QM_NODE_NUMA, -1); /* unlinked filler */
        }
    }
    for (int k = 0; k < 3; ++k) {
        char id[32];
        snprintf(id, sizeof id, "g%d", ids[k]);
        put_node(b, ids[k], id, QM_NODE_GPU, k == 0 ? -1 : numa);
        b->nodes[ids[k]].memory_bytes = 48ull << 30;
        b->nodes[ids[k]].hbm_bw_bytes_per_s = 768e9;
        b->gpus[k] = ids[k];
    }
    b->t.n_gpus = 3;
    b->t.gpus = b->gpus;
    add_link(b, ids[0], sw, 32e9);
    add_link(b, ids[1], sw, 32e9);
    add_link(b, ids[1], numa, 24e9);
    add_link(b, ids[2], numa, 24e9);
}

static char *print_to_string(const qm_topo_matrix *m)
{
    FILE *f = tmpfile();
    if (!f)
        return NULL;
    char *s = NULL;
    if (qm_topo_matrix_print(m, f, NULL) == QM_OK) {
        long n = ftell(f);
        s = calloc((size_t)n + 1, 1);
        rewind(f);
        if (s && fread(s, 1, (size_t)n, f) != (size_t)n)
            s[0] = '\0';
    }
    fclose(f);
    return s;
}

/* Item 1 on T3: the diagonal is each device itself (class nvlink, its HBM bandwidth, the best link of
 * its row); 0<->2 has no peer access; the other pairs do. */
static void item1_t3(const int ids[3])
{
    t3 b;
    build_t3(&b, ids);
    qm_topo_graph *g = NULL;
    CHECK_OK(qm_topo_graph_create(&b.t, &g, NULL));
    qm_topo_matrix *m = NULL;
    CHECK_OK(qm_topo_matrix_create(g, ids, 3, &m, NULL));
    for (int i = 0; i < 3; ++i) {
        const qm_topo_pair *d = qm_topo_matrix_get(m, ids[i], ids[i]);
        CHECK(d->self && d->peer);
        CHECK_EQ_U64(d->cls, QM_LINK_NVLINK);
        CHECK(d->bw_bytes_per_s == 768e9);
        for (int j = 0; j < 3; ++j) {
            const qm_topo_pair *p = qm_topo_matrix_get(m, ids[i], ids[j]);
            if (j != i && p->peer) /* the diagonal is the best link of the row */
                CHECK(p->cls >= d->cls && p->bw_bytes_per_s < d->bw_bytes_per_s);
        }
    }
    const qm_topo_pair *p01 = qm_topo_matrix_get(m, ids[0], ids[1]);
    const qm_topo_pair *p12 = qm_topo_matrix_get(m, ids[1], ids[2]);
    const qm_topo_pair *p02 = qm_topo_matrix_get(m, ids[0], ids[2]);
    const qm_topo_pair *p20 = qm_topo_matrix_get(m, ids[2], ids[0]);
    CHECK(p01->peer && !p01->self);
    CHECK_EQ_U64(p01->cls, QM_LINK_PCIE);
    CHECK(p01->bw_bytes_per_s == 32e9);
    CHECK_EQ_U64(p01->hops, 2);
    CHECK(p12->peer);
    CHECK_EQ_U64(p12->cls, QM_LINK_PCIE);
    CHECK(p12->bw_bytes_per_s == 24e9);
    CHECK(!p02->peer && !p20->peer); /* unknown pair: no peer access */
    CHECK(p02->bw_bytes_per_s == 0 && p02->hops == 0);

    char *text = print_to_string(m);
    char expect[1024];
    int w_id = (int)strlen(b.nodes[ids[0]].id); /* "g0" or "g10": the ids of one set are as wide */
    snprintf(expect, sizeof expect,
             "%*s  %-9.16s  %-9.16s  %.16s\n"
             "%.16s  X          pcie 32.0  -\n"
             "%.16s  pcie 32.0  X          pcie 24.0\n"
             "%.16s  -          pcie 24.0  X\n",
             w_id, "", b.nodes[ids[0]].id, b.nodes[ids[1]].id, b.nodes[ids[2]].id,
             b.nodes[ids[0]].id, b.nodes[ids[1]].id, b.nodes[ids[2]].id);
    CHECK(text != NULL && strncmp(text, expect, strlen(expect)) == 0);
    if (text && strncmp(text, expect, strlen(expect)) != 0)
        fprintf(stderr, "conformance item 1: matrix text was:\n%s\nexpected it to start with:\n%s",
                text, expect);
    free(text);

    json_t *js = NULL;
    CHECK_OK(qm_topo_matrix_json(m, &js, NULL));
    json_t *c02 = json_array_get(json_array_get(json_object_get(js, "matrix"), 0), 2);
    CHECK(json_is_false(json_object_get(c02, "peer")));
    CHECK(json_is_null(json_object_get(c02, "class")));
    json_t *c11 = json_array_get(json_array_get(json_object_get(js, "matrix"), 1), 1);
    CHECK(json_is_true(json_object_get(c11, "self")));
    CHECK(json_is_true(json_object_get(c11, "peer")));
    json_decref(js);
    qm_topo_matrix_destroy(m);
    qm_topo_graph_destroy(g);
}

/* Item 1 for n = 1..4 devices on one NVSwitch: every diagonal entry is the device itself and the
 * best link of its row. */
static void item1_nvswitch(void)
{
    for (int n = 1; n <= 4; ++n) {
        qm_topology t;
        qm_host host = {.id = "n0"};
        qm_node nodes[5];
        qm_link links[4];
        int devs[4];
        memset(&t, 0, sizeof t);
        memset(nodes, 0, sizeof nodes);
        for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
            t.efficiency[c] = 1;
        t.hbm_efficiency = 1;
        t.hosts = &host;
        t.n_hosts = 1;
        t.nodes = nodes;
        t.links = links;
        snprintf(nodes[0].id, sizeof nodes[0].id, "n0.nvs");
        nodes[0].kind = QM_NODE_NVSWITCH;
        nodes[0].numa = nodes[0].attach = nodes[0].type = -1;
        for (int i = 0; i < n; ++i) {
            qm_node *d = &nodes[1 + i];
            snprintf(d->id, sizeof d->id, "n0.g%d", i);
            d->kind = QM_NODE_GPU;
            d->numa = d->attach = d->type = -1;
            d->hbm_bw_bytes_per_s = 3.35e12;
            links[i] = (qm_link){.a = 1 + i, .b = 0, .cls = QM_LINK_NVLINK,
                                 .bw_ab_bytes_per_s = 450e9, .bw_ba_bytes_per_s = 450e9,
                                 .latency_s = -1, .fabric = -1};
            devs[i] = 1 + i;
        }
        t.n_nodes = 1 + n;
        t.n_links = n;
        qm_topo_graph *g = NULL;
        qm_topo_matrix *m = NULL;
        CHECK_OK(qm_topo_graph_create(&t, &g, NULL));
        CHECK_OK(qm_topo_matrix_create(g, devs, n, &m, NULL));
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
                const qm_topo_pair *p = qm_topo_matrix_get(m, devs[i], devs[j]);
                CHECK(p->peer);
                CHECK_EQ_U64(p->cls, QM_LINK_NVLINK);
                CHECK(p->self == (i == j));
                CHECK(p->bw_bytes_per_s == (i == j ? 3.35e12 : 450e9));
            }
        qm_topo_matrix_destroy(m);
        qm_topo_graph_destroy(g);
    }
}

/* Item 4: gather device and placement order, reported as device ids. `given` is the order the
 * request lists the devices in. */
static void item4(const int ids[3], const int given[3])
{
    t3 b;
    build_t3(&b, ids);
    qm_topo_graph *g = NULL;
    CHECK_OK(qm_topo_graph_create(&b.t, &g, NULL));
    int gather = -1, order[3] = {-1, -1, -1};
    CHECK_OK(qm_topo_graph_best_connected(g, given, 3, &gather, NULL));
    CHECK_OK(qm_topo_graph_affinity_order(g, given, 3, order, NULL));
    if (gather != ids[1] || order[0] != ids[1] || order[1] != ids[0] || order[2] != ids[2])
        qm_test_fail(__FILE__, __LINE__,
                     "conformance item 4 (ids %d,%d,%d given as %d,%d,%d): expected gather device "
                     "%d and order [%d, %d, %d], got %d and [%d, %d, %d]",
                     ids[0], ids[1], ids[2], given[0], given[1], given[2], ids[1], ids[1], ids[0],
                     ids[2], gather, order[0], order[1], order[2]);
    CHECK_EQ_U64(gather, ids[1]);
    char want[32];
    snprintf(want, sizeof want, "g%d", ids[1]);
    CHECK_STR(qm_topo_graph_node_id(g, gather), want);
    CHECK_EQ_U64(order[0], ids[1]);
    CHECK_EQ_U64(order[1], ids[0]);
    CHECK_EQ_U64(order[2], ids[2]);

    /* 0<->2 has no path: the set is not mutually connected; E-DISCONNECTED names both by id */
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_check_connected(g, ids, 3, &st) == QM_E_DISCONNECTED);
    char msg[160];
    snprintf(msg, sizeof msg,
             "topology: no path from device g%d to device g%d (nodes %d -> %d, in a set of 3 devices)",
             ids[0], ids[2], ids[0], ids[2]);
    CHECK_ERR(st, QM_E_DISCONNECTED, msg);
    CHECK_OK(qm_topo_graph_check_connected(g, ids, 2, NULL));
    CHECK_OK(qm_topo_graph_check_connected(g, ids + 1, 2, NULL));
    qm_topo_graph_destroy(g);
}

int main(void)
{
    const int ids_a[3] = {0, 1, 2}, ids_b[3] = {10, 11, 12};
    /* item 1 */
    item1_t3(ids_a);
    item1_t3(ids_b);
    item1_nvswitch();
    /* item 4: [0,1,2] -> gather 1, order [1, 0, 2]; [10,11,12] -> 11, [11, 10, 12],
     * whatever order the request lists them in */
    item4(ids_a, ids_a);
    item4(ids_b, ids_b);
    const int shuffled[3] = {12, 10, 11}, reversed[3] = {12, 11, 10};
    item4(ids_b, shuffled);
    item4(ids_b, reversed);
    return qm_test_end("test_conformance_topology (items 1 and 4)");
}
