/* test_topology.c — unit tests of the topology graph (engine/topology.c) on hand-built topologies:
 * NVSwitch, a two-socket PCIe tree, two hosts over InfiniBand, an NVLink bridge beside PCIe,
 * asymmetric links, the cases where a one-label-per-node Dijkstra would be wrong, tie-breaking,
 * GPUs as non-transit nodes, renderings (table, JSON, DOT), argument validation, and a 1024-host
 * topology queried without all-pairs storage. Every pair's class and bandwidth are asserted. */
#include "testlib.h"
#include "topology.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_DBL(a, b)                                                                            \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        qm_test_checks++;                                                                          \
        if (!(a_ == b_))                                                                           \
            qm_test_fail(__FILE__, __LINE__, "%s == %s: %.17g != %.17g", #a, #b, a_, b_);          \
    } while (0)
#define CHECK_NEAR(a, b)                                                                           \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        qm_test_checks++;                                                                          \
        if (!(fabs(a_ - b_) <= 1e-12 * fabs(b_)))                                                  \
            qm_test_fail(__FILE__, __LINE__, "%s ~= %s: %.17g != %.17g", #a, #b, a_, b_);          \
    } while (0)

/* ---- a small builder for qm_topology (what the loader would produce) ------------------------- */

typedef struct tb {
    qm_topology t;
} tb;

static const double LAT_NVLINK = 0.9e-6, LAT_C2C = 0.8e-6, LAT_PCIE = 1.0e-6, LAT_SYS = 2.0e-6,
                    LAT_NET = 5.0e-6;

static void tb_init(tb *b, const char *name, int max_hosts, int max_nodes, int max_links)
{
    memset(b, 0, sizeof *b);
    snprintf(b->t.name, sizeof b->t.name, "%s", name);
    b->t.hosts = calloc((size_t)max_hosts, sizeof *b->t.hosts);
    b->t.nodes = calloc((size_t)max_nodes, sizeof *b->t.nodes);
    b->t.links = calloc((size_t)max_links, sizeof *b->t.links);
    b->t.gpus = calloc((size_t)max_nodes, sizeof *b->t.gpus);
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        b->t.efficiency[c] = 1.0;
    b->t.hbm_efficiency = 1.0;
    b->t.latency_s[QM_LINK_NVLINK] = LAT_NVLINK;
    b->t.latency_s[QM_LINK_C2C] = LAT_C2C;
    b->t.latency_s[QM_LINK_PCIE] = LAT_PCIE;
    b->t.latency_s[QM_LINK_SYS] = LAT_SYS;
    b->t.latency_s[QM_LINK_NET] = LAT_NET;
}

static void tb_free(tb *b)
{
    free(b->t.hosts);
    free(b->t.nodes);
    free(b->t.links);
    free(b->t.gpus);
}

static int tb_host(tb *b, const char *id)
{
    qm_host *h = &b->t.hosts[b->t.n_hosts];
    snprintf(h->id, sizeof h->id, "%s", id);
    return b->t.n_hosts++;
}

static int tb_node(tb *b, const char *id, qm_node_kind kind, int host, int numa)
{
    qm_node *n = &b->t.nodes[b->t.n_nodes];
    snprintf(n->id, sizeof n->id, "%s", id);
    n->kind = kind;
    n->host = host;
    n->numa = numa;
    n->type = -1;
    n->attach = -1;
    if (kind == QM_NODE_GPU)
        b->t.gpus[b->t.n_gpus++] = b->t.n_nodes;
    return b->t.n_nodes++;
}

static int tb_gpu(tb *b, const char *id, int host, int numa, double hbm)
{
    int i = tb_node(b, id, QM_NODE_GPU, host, numa);
    b->t.nodes[i].memory_bytes = 80ull << 30;
    b->t.nodes[i].hbm_bw_bytes_per_s = hbm;
    return i;
}

static int tb_nic(tb *b, const char *id, int host, int numa, int attach, double speed)
{
    int i = tb_node(b, id, QM_NODE_NIC, host, numa);
    b->t.nodes[i].attach = attach;
    b->t.nodes[i].nic_bw_bytes_per_s = speed;
    return i;
}

static int tb_link2(tb *b, int a, int bb, qm_link_class cls, double bw_ab, double bw_ba)
{
    qm_link *l = &b->t.links[b->t.n_links];
    *l = (qm_link){.a = a, .b = bb, .cls = cls, .bw_ab_bytes_per_s = bw_ab,
                   .bw_ba_bytes_per_s = bw_ba, .latency_s = -1, .fabric = -1};
    return b->t.n_links++;
}

static int tb_link(tb *b, int a, int bb, qm_link_class cls, double bw)
{
    return tb_link2(b, a, bb, cls, bw, bw);
}

static qm_topo_graph *make_graph(const tb *b)
{
    qm_topo_graph *g = NULL;
    qm_status st;
    qm_status_clear(&st);
    if (qm_topo_graph_create(&b->t, &g, &st) != QM_OK)
        qm_test_fail(__FILE__, __LINE__, "graph create: %s", st.msg);
    return g;
}

static qm_topo_path path_of(qm_topo_graph *g, int src, int dst)
{
    qm_topo_path p;
    qm_status st;
    qm_status_clear(&st);
    memset(&p, 0, sizeof p);
    if (qm_topo_graph_path(g, src, dst, &p, &st) != QM_OK)
        qm_test_fail(__FILE__, __LINE__, "path %d -> %d: %s", src, dst, st.msg);
    return p;
}

/* Read a whole tmpfile back. */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    return s;
}

/* ---- (a) NVSwitch with 4 GPUs ---------------------------------------------------------------- */

static void test_nvswitch(void)
{
    tb b;
    tb_init(&b, "nvs4", 1, 8, 8);
    int h = tb_host(&b, "n0");
    int numa = tb_node(&b, "n0.numa0", QM_NODE_NUMA, h, -1);
    int nvs = tb_node(&b, "n0.nvs", QM_NODE_NVSWITCH, h, -1);
    int g[4], l[4];
    for (int i = 0; i < 4; ++i) {
        char id[16];
        snprintf(id, sizeof id, "n0.g%d", i);
        g[i] = tb_gpu(&b, id, h, numa, 4.8e12);
        l[i] = tb_link(&b, g[i], nvs, QM_LINK_NVLINK, 450e9);
    }
    b.t.efficiency[QM_LINK_NVLINK] = 0.824;
    b.t.hbm_efficiency = 0.9;
    qm_topo_graph *gr = make_graph(&b);
    CHECK(gr != NULL);
    const double port = 450e9 * 0.824;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            if (i == j)
                continue;
            qm_topo_path p = path_of(gr, g[i], g[j]);
            CHECK(p.found);
            CHECK_EQ_U64(p.cls, QM_LINK_NVLINK);
            CHECK_DBL(p.bw_bytes_per_s, port);
            CHECK_EQ_U64(p.hops, 2);
            CHECK_NEAR(p.latency_s, 2 * LAT_NVLINK);
            CHECK_EQ_U64(p.links[0], l[i]);
            CHECK(p.a_to_b[0]); /* g -> nvs is a -> b */
            CHECK_EQ_U64(p.links[1], l[j]);
            CHECK(!p.a_to_b[1]);
            CHECK_EQ_U64(p.nodes[0], g[i]);
            CHECK_EQ_U64(p.nodes[1], nvs);
            CHECK_EQ_U64(p.nodes[2], g[j]);
        }
    /* a node to itself */
    qm_topo_path self = path_of(gr, g[2], g[2]);
    CHECK(self.found);
    CHECK_EQ_U64(self.hops, 0);
    CHECK(isinf(self.bw_bytes_per_s));
    /* no host links were declared: no ingest path, reported as "not found", not an error */
    qm_topo_path ing;
    CHECK_OK(qm_topo_graph_ingest_path(gr, g[0], true, &ing, NULL));
    CHECK(!ing.found);
    CHECK_EQ_U64(ing.src, numa);

    qm_topo_matrix *m = NULL;
    CHECK_OK(qm_topo_matrix_create(gr, g, 4, &m, NULL));
    CHECK_EQ_U64(m->n, 4);
    for (int i = 0; i < 4; ++i) {
        const qm_topo_pair *d = qm_topo_matrix_get(m, g[i], g[i]);
        CHECK(d->self && d->peer);
        CHECK_EQ_U64(d->cls, QM_LINK_NVLINK);
        CHECK_DBL(d->bw_bytes_per_s, 4.8e12 * 0.9);
        for (int j = 0; j < 4; ++j)
            if (j != i) {
                const qm_topo_pair *p = qm_topo_matrix_get(m, g[i], g[j]);
                CHECK(!p->self && p->peer);
                CHECK_EQ_U64(p->cls, QM_LINK_NVLINK);
                CHECK_DBL(p->bw_bytes_per_s, port);
            }
    }
    CHECK(qm_topo_matrix_get(m, nvs, g[0]) == NULL);
    CHECK_OK(qm_topo_matrix_check_connected(m, NULL));
    int best = -1, order[4] = {0};
    CHECK_OK(qm_topo_matrix_best_connected(m, &best, NULL));
    CHECK_EQ_U64(best, g[0]); /* all equal: first in the given order */
    CHECK_OK(qm_topo_matrix_affinity_order(m, order, NULL));
    for (int i = 0; i < 4; ++i)
        CHECK_EQ_U64(order[i], g[i]);

    FILE *f = tmpfile();
    CHECK_OK(qm_topo_matrix_print(m, f, NULL));
    char *text = slurp(f);
    CHECK_STR(text, "       n0.g0         n0.g1         n0.g2         n0.g3\n"
                    "n0.g0  X             nvlink 370.8  nvlink 370.8  nvlink 370.8\n"
                    "n0.g1  nvlink 370.8  X             nvlink 370.8  nvlink 370.8\n"
                    "n0.g2  nvlink 370.8  nvlink 370.8  X             nvlink 370.8\n"
                    "n0.g3  nvlink 370.8  nvlink 370.8  nvlink 370.8  X\n"
                    "X = self; - = no path (no peer access); otherwise link class and GB/s per "
                    "direction (row -> column, after efficiency)\n");
    free(text);
    fclose(f);
    qm_topo_matrix_destroy(m);
    qm_topo_graph_destroy(gr);
    tb_free(&b);
}

/* ---- (b) PCIe tree over two sockets ---------------------------------------------------------- */

typedef struct pcie2 {
    tb b;
    int numa[2], sw[2], g[4], l_sys, l_up[2], l_gpu[4];
} pcie2;

static void build_pcie2(pcie2 *p, double sys_bw)
{
    tb_init(&p->b, "pcie2", 1, 16, 16);
    int h = tb_host(&p->b, "n0");
    p->numa[0] = tb_node(&p->b, "n0.numa0", QM_NODE_NUMA, h, -1);
    p->numa[1] = tb_node(&p->b, "n0.numa1", QM_NODE_NUMA, h, -1);
    p->sw[0] = tb_node(&p->b, "n0.sw0", QM_NODE_PCIE_SWITCH, h, p->numa[0]);
    p->sw[1] = tb_node(&p->b, "n0.sw1", QM_NODE_PCIE_SWITCH, h, p->numa[1]);
    for (int i = 0; i < 4; ++i) {
        char id[16];
        snprintf(id, sizeof id, "n0.g%d", i);
        p->g[i] = tb_gpu(&p->b, id, h, p->numa[i / 2], 768e9);
    }
    p->l_sys = tb_link(&p->b, p->numa[0], p->numa[1], QM_LINK_SYS, sys_bw);
    for (int s = 0; s < 2; ++s)
        p->l_up[s] = tb_link(&p->b, p->numa[s], p->sw[s], QM_LINK_PCIE, 64e9);
    for (int i = 0; i < 4; ++i)
        p->l_gpu[i] = tb_link(&p->b, p->sw[i / 2], p->g[i], QM_LINK_PCIE, 32e9);
    p->b.t.efficiency[QM_LINK_PCIE] = 0.75;
}

static void test_pcie_two_sockets(void)
{
    for (int variant = 0; variant < 2; ++variant) {
        /* variant 0: the socket link (22 GB/s) is the bottleneck; variant 1: the GPU links
         * (32 GB/s x 0.75 = 24 GB/s) are, below a 40 GB/s socket link */
        pcie2 p;
        build_pcie2(&p, variant == 0 ? 22e9 : 40e9);
        qm_topo_graph *g = make_graph(&p.b);
        const double same = 32e9 * 0.75, cross = variant == 0 ? 22e9 : 32e9 * 0.75;
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
                if (i == j)
                    continue;
                qm_topo_path q = path_of(g, p.g[i], p.g[j]);
                CHECK(q.found);
                if (i / 2 == j / 2) {
                    CHECK_EQ_U64(q.cls, QM_LINK_PCIE);
                    CHECK_DBL(q.bw_bytes_per_s, same);
                    CHECK_EQ_U64(q.hops, 2);
                    CHECK_EQ_U64(q.nodes[1], p.sw[i / 2]);
                    CHECK_NEAR(q.latency_s, 2 * LAT_PCIE);
                } else {
                    CHECK_EQ_U64(q.cls, QM_LINK_SYS);
                    CHECK_DBL(q.bw_bytes_per_s, cross);
                    CHECK_EQ_U64(q.hops, 5);
                    CHECK_EQ_U64(q.links[2], p.l_sys);
                    CHECK(q.a_to_b[2] == (i < j)); /* numa0 -> numa1 is a -> b */
                    CHECK_NEAR(q.latency_s, 4 * LAT_PCIE + LAT_SYS);
                }
            }
        /* ingest: NUMA node -> GPU and back */
        for (int i = 0; i < 4; ++i) {
            qm_topo_path in, outp;
            CHECK_OK(qm_topo_graph_ingest_path(g, p.g[i], true, &in, NULL));
            CHECK_OK(qm_topo_graph_ingest_path(g, p.g[i], false, &outp, NULL));
            CHECK(in.found && outp.found);
            CHECK_EQ_U64(in.src, p.numa[i / 2]);
            CHECK_EQ_U64(outp.dst, p.numa[i / 2]);
            CHECK_EQ_U64(in.cls, QM_LINK_PCIE);
            CHECK_DBL(in.bw_bytes_per_s, 32e9 * 0.75);
            CHECK_EQ_U64(in.hops, 2);
            CHECK_EQ_U64(in.links[0], p.l_up[i / 2]);
            CHECK_EQ_U64(in.links[1], p.l_gpu[i]);
        }

        qm_topo_matrix *m = NULL;
        CHECK_OK(qm_topo_matrix_create(g, p.g, 4, &m, NULL));
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
                const qm_topo_pair *q = qm_topo_matrix_get(m, p.g[i], p.g[j]);
                if (i == j) {
                    CHECK(q->self);
                    CHECK_DBL(q->bw_bytes_per_s, 768e9);
                } else {
                    CHECK(q->peer);
                    CHECK_EQ_U64(q->cls, i / 2 == j / 2 ? QM_LINK_PCIE : QM_LINK_SYS);
                    CHECK_DBL(q->bw_bytes_per_s, i / 2 == j / 2 ? same : cross);
                }
            }
        if (variant == 0) {
            FILE *f = tmpfile();
            CHECK_OK(qm_topo_matrix_print(m, f, NULL));
            char *text = slurp(f);
            CHECK(strstr(text, "n0.g0  X          pcie 24.0  sys 22.0   sys 22.0\n") != NULL);
            CHECK(strstr(text, "n0.g3  sys 22.0   sys 22.0   pcie 24.0  X\n") != NULL);
            free(text);
            fclose(f);

            json_t *js = NULL;
            CHECK_OK(qm_topo_matrix_json(m, &js, NULL));
            CHECK(js != NULL);
            json_t *dev1 = json_array_get(json_object_get(js, "devices"), 1);
            CHECK_STR(json_string_value(json_object_get(dev1, "id")), "n0.g1");
            CHECK_EQ_U64(json_integer_value(json_object_get(dev1, "node")), p.g[1]);
            json_t *rows = json_object_get(js, "matrix");
            CHECK_EQ_U64(json_array_size(rows), 4);
            json_t *c01 = json_array_get(json_array_get(rows, 0), 1);
            CHECK_STR(json_string_value(json_object_get(c01, "class")), "pcie");
            CHECK_DBL(json_real_value(json_object_get(c01, "bw_bytes_per_s")), 24e9);
            CHECK_EQ_U64(json_integer_value(json_object_get(c01, "hops")), 2);
            CHECK(json_is_false(json_object_get(c01, "self")));
            json_t *c23 = json_array_get(json_array_get(rows, 0), 2);
            CHECK_STR(json_string_value(json_object_get(c23, "class")), "sys");
            json_t *c00 = json_array_get(json_array_get(rows, 0), 0);
            CHECK(json_is_true(json_object_get(c00, "self")));
            CHECK_STR(json_string_value(json_object_get(c00, "class")), "nvlink");
            CHECK_DBL(json_real_value(json_object_get(c00, "bw_bytes_per_s")), 768e9);
            json_decref(js);
        }
        qm_topo_matrix_destroy(m);

        /* gather device and order: all devices tie on reach, worst class (sys) and bandwidth sum,
         * so the first given wins; the order pairs switch mates first */
        int best = -1, order[4];
        int given[4] = {p.g[2], p.g[0], p.g[3], p.g[1]};
        CHECK_OK(qm_topo_graph_best_connected(g, p.g, 4, &best, NULL));
        CHECK_EQ_U64(best, p.g[0]);
        CHECK_OK(qm_topo_graph_affinity_order(g, p.g, 4, order, NULL));
        CHECK_EQ_U64(order[0], p.g[0]);
        CHECK_EQ_U64(order[1], p.g[1]);
        CHECK_EQ_U64(order[2], p.g[2]);
        CHECK_EQ_U64(order[3], p.g[3]);
        CHECK_OK(qm_topo_graph_affinity_order(g, given, 4, order, NULL));
        CHECK_EQ_U64(order[0], p.g[2]);
        CHECK_EQ_U64(order[1], p.g[3]);
        CHECK_EQ_U64(order[2], p.g[0]);
        CHECK_EQ_U64(order[3], p.g[1]);
        qm_topo_graph_destroy(g);
        tb_free(&p.b);
    }
}

/* ---- (c) two hosts over InfiniBand ----------------------------------------------------------- */

static void test_two_hosts_ib(void)
{
    tb b;
    tb_init(&b, "ib2", 2, 16, 16);
    int g[2][2], nic[2], sw[2], numa[2], l_port[2];
    int fab = -1;
    for (int h = 0; h < 2; ++h) {
        char id[32];
        int host = tb_host(&b, h ? "n1" : "n0");
        snprintf(id, sizeof id, "n%d.numa0", h);
        numa[h] = tb_node(&b, id, QM_NODE_NUMA, host, -1);
        snprintf(id, sizeof id, "n%d.sw0", h);
        sw[h] = tb_node(&b, id, QM_NODE_PCIE_SWITCH, host, numa[h]);
        for (int i = 0; i < 2; ++i) {
            snprintf(id, sizeof id, "n%d.g%d", h, i);
            g[h][i] = tb_gpu(&b, id, host, numa[h], 2e12);
        }
        snprintf(id, sizeof id, "n%d.ib0", h);
        nic[h] = tb_nic(&b, id, host, numa[h], sw[h], 25e9); /* HDR 200 Gb/s */
        tb_link(&b, numa[h], sw[h], QM_LINK_PCIE, 64e9);
        for (int i = 0; i < 2; ++i)
            tb_link(&b, sw[h], g[h][i], QM_LINK_PCIE, 64e9);
    }
    fab = tb_node(&b, "ib", QM_NODE_FABRIC_SWITCH, -1, -1);
    for (int h = 0; h < 2; ++h)
        l_port[h] = tb_link(&b, nic[h], fab, QM_LINK_NET, 50e9);
    qm_topo_graph *gr = make_graph(&b);

    /* each NIC got an implicit pcie link to its attach switch at the NIC speed */
    CHECK_EQ_U64(qm_topo_graph_link_count(gr), b.t.n_links + 2);
    for (int h = 0; h < 2; ++h) {
        const qm_link *il = qm_topo_graph_link(gr, b.t.n_links + h);
        CHECK(il != NULL);
        CHECK_EQ_U64(il->a, nic[h]);
        CHECK_EQ_U64(il->b, sw[h]);
        CHECK_EQ_U64(il->cls, QM_LINK_PCIE);
        CHECK_DBL(qm_topo_graph_link_bw(gr, b.t.n_links + h, true), 25e9);
        CHECK_DBL(qm_topo_graph_link_latency(gr, b.t.n_links + h), LAT_PCIE);
    }
    CHECK(qm_topo_graph_link(gr, b.t.n_links + 2) == NULL);

    for (int h1 = 0; h1 < 2; ++h1)
        for (int i1 = 0; i1 < 2; ++i1)
            for (int h2 = 0; h2 < 2; ++h2)
                for (int i2 = 0; i2 < 2; ++i2) {
                    if (h1 == h2 && i1 == i2)
                        continue;
                    qm_topo_path p = path_of(gr, g[h1][i1], g[h2][i2]);
                    CHECK(p.found);
                    if (h1 == h2) {
                        CHECK_EQ_U64(p.cls, QM_LINK_PCIE);
                        CHECK_DBL(p.bw_bytes_per_s, 64e9);
                        CHECK_EQ_U64(p.hops, 2);
                    } else {
                        CHECK_EQ_U64(p.cls, QM_LINK_NET);
                        CHECK_DBL(p.bw_bytes_per_s, 25e9); /* the NIC speed */
                        CHECK_EQ_U64(p.hops, 6);
                        CHECK_EQ_U64(p.nodes[2], nic[h1]);
                        CHECK_EQ_U64(p.nodes[3], fab);
                        CHECK_EQ_U64(p.nodes[4], nic[h2]);
                        CHECK_EQ_U64(p.links[1], b.t.n_links + h1); /* implicit NIC link */
                        CHECK(!p.a_to_b[1]);
                        CHECK_EQ_U64(p.links[2], l_port[h1]);
                        CHECK_EQ_U64(p.links[3], l_port[h2]);
                        CHECK_NEAR(p.latency_s, 4 * LAT_PCIE + 2 * LAT_NET);
                    }
                }
    int all[4] = {g[0][0], g[0][1], g[1][0], g[1][1]};
    CHECK_OK(qm_topo_graph_check_connected(gr, all, 4, NULL));

    FILE *f = tmpfile();
    CHECK_OK(qm_topo_graph_dot(gr, f, NULL));
    char *dot = slurp(f);
    CHECK(strncmp(dot, "graph \"ib2\" {\n", 14) == 0);
    CHECK(strstr(dot, "  subgraph \"cluster_n1\" {\n    label=\"n1\";\n") != NULL);
    CHECK(strstr(dot, "    \"n0.g0\" [shape=box, label=\"n0.g0\\ngpu\"];\n") != NULL);
    CHECK(strstr(dot, "    \"n0.sw0\" [shape=diamond, label=\"n0.sw0\\npcie_switch\"];\n") != NULL);
    CHECK(strstr(dot, "    \"n1.ib0\" [shape=parallelogram, label=\"n1.ib0\\nnic\"];\n") != NULL);
    CHECK(strstr(dot, "\n  \"ib\" [shape=octagon, label=\"ib\\nfabric_switch\"];\n") != NULL);
    CHECK(strstr(dot, "  \"n0.ib0\" -- \"ib\" [label=\"net 50.0 GB/s\"];\n") != NULL);
    CHECK(strstr(dot, "  \"n1.ib0\" -- \"n1.sw0\" [label=\"pcie 25.0 GB/s\", style=dashed];\n") != NULL);
    CHECK(strcmp(dot + strlen(dot) - 2, "}\n") == 0);
    free(dot);
    fclose(f);
    qm_topo_graph_destroy(gr);

    /* an explicit NIC link suppresses the implicit one */
    tb_link(&b, nic[0], sw[0], QM_LINK_PCIE, 30e9);
    gr = make_graph(&b);
    CHECK_EQ_U64(qm_topo_graph_link_count(gr), b.t.n_links + 1);
    CHECK_EQ_U64(qm_topo_graph_link(gr, b.t.n_links)->a, nic[1]);
    qm_topo_path p = path_of(gr, g[0][0], g[1][0]);
    CHECK_DBL(p.bw_bytes_per_s, 25e9); /* n1's implicit 25 GB/s link is still the bottleneck */
    p = path_of(gr, g[0][0], nic[0]);
    CHECK_DBL(p.bw_bytes_per_s, 30e9);
    qm_topo_graph_destroy(gr);
    tb_free(&b);
}

/* ---- implicit device links: a device with a NUMA node and no pcie/sys/c2c link of its own ------ */

static void test_implicit_device_links(void)
{
    tb b;
    tb_init(&b, "implicit", 1, 8, 8);
    b.t.host_link_bw_bytes_per_s = 31.5e9;
    int host = tb_host(&b, "n0");
    int numa = tb_node(&b, "n0.numa0", QM_NODE_NUMA, host, -1);
    int sw = tb_node(&b, "n0.sw0", QM_NODE_PCIE_SWITCH, host, numa);
    int g0 = tb_gpu(&b, "n0.g0", host, numa, 2e12); /* nvlink only: gets the implicit link */
    int g1 = tb_gpu(&b, "n0.g1", host, numa, 2e12); /* behind the switch: none */
    int g2 = tb_gpu(&b, "n0.g2", host, -1, 2e12);   /* no NUMA node: none */
    tb_link(&b, numa, sw, QM_LINK_PCIE, 64e9);
    tb_link(&b, sw, g1, QM_LINK_PCIE, 64e9);
    tb_link(&b, g0, g1, QM_LINK_NVLINK, 300e9);
    tb_link(&b, g1, g2, QM_LINK_NVLINK, 300e9);
    int target[8];
    CHECK_EQ_U64(qm_topology_implicit_links(&b.t, target), 1);
    CHECK_EQ_U64(target[g0], numa);
    CHECK(target[g1] == -1 && target[g2] == -1 && target[numa] == -1 && target[sw] == -1);
    CHECK_DBL(qm_topology_implicit_bw(&b.t, g0), 31.5e9);

    qm_topo_graph *gr = make_graph(&b);
    CHECK_EQ_U64(qm_topo_graph_link_count(gr), b.t.n_links + 1);
    const qm_link *il = qm_topo_graph_link(gr, b.t.n_links);
    CHECK(il && il->a == g0 && il->b == numa && il->cls == QM_LINK_PCIE);
    CHECK_DBL(qm_topo_graph_link_bw(gr, b.t.n_links, true), 31.5e9);
    qm_topo_path p;
    qm_status st;
    CHECK_OK(qm_topo_graph_ingest_path(gr, g0, true, &p, &st));
    CHECK(p.found && p.hops == 1 && p.links[0] == b.t.n_links);
    CHECK_DBL(p.bw_bytes_per_s, 31.5e9);
    CHECK_OK(qm_topo_graph_ingest_path(gr, g1, true, &p, &st));
    CHECK(p.found && p.hops == 2);
    CHECK_DBL(p.bw_bytes_per_s, 64e9);
    qm_topo_graph_destroy(gr);

    /* host_link 0 turns them off (the hand-built topologies of the other tests) */
    b.t.host_link_bw_bytes_per_s = 0;
    CHECK_EQ_U64(qm_topology_implicit_links(&b.t, target), 0);
    /* a pcie link of its own, to anything, means the file modelled the attachment itself */
    b.t.host_link_bw_bytes_per_s = 31.5e9;
    tb_link(&b, g0, sw, QM_LINK_PCIE, 16e9);
    CHECK_EQ_U64(qm_topology_implicit_links(&b.t, target), 0);
    tb_free(&b);
}

/* ---- (d) NVLink bridge beside PCIe (A6000 style) --------------------------------------------- */

static void test_nvlink_bridge(void)
{
    for (int variant = 0; variant < 2; ++variant) {
        /* variant 1: a bridge slower than PCIe still wins: class comes before bandwidth */
        double bridge_bw = variant == 0 ? 56.25e9 : 10e9;
        tb b;
        tb_init(&b, "a6000", 1, 8, 8);
        int h = tb_host(&b, "n0");
        int numa = tb_node(&b, "n0.numa0", QM_NODE_NUMA, h, -1);
        int sw = tb_node(&b, "n0.sw0", QM_NODE_PCIE_SWITCH, h, numa);
        int g0 = tb_gpu(&b, "n0.g0", h, numa, 768e9);
        int g1 = tb_gpu(&b, "n0.g1", h, numa, 768e9);
        tb_link(&b, numa, sw, QM_LINK_PCIE, 32e9);
        tb_link(&b, sw, g0, QM_LINK_PCIE, 32e9);
        tb_link(&b, sw, g1, QM_LINK_PCIE, 32e9);
        int bridge = tb_link(&b, g0, g1, QM_LINK_NVLINK, bridge_bw);
        b.t.efficiency[QM_LINK_PCIE] = 0.82;
        qm_topo_graph *g = make_graph(&b);
        for (int d = 0; d < 2; ++d) {
            qm_topo_path p = d ? path_of(g, g1, g0) : path_of(g, g0, g1);
            CHECK(p.found);
            CHECK_EQ_U64(p.cls, QM_LINK_NVLINK);
            CHECK_DBL(p.bw_bytes_per_s, bridge_bw);
            CHECK_EQ_U64(p.hops, 1);
            CHECK_EQ_U64(p.links[0], bridge);
            CHECK(p.a_to_b[0] == (d == 0));
            CHECK_NEAR(p.latency_s, LAT_NVLINK);
        }
        qm_topo_path in = path_of(g, numa, g0);
        CHECK_EQ_U64(in.cls, QM_LINK_PCIE);
        CHECK_DBL(in.bw_bytes_per_s, 32e9 * 0.82);
        if (variant == 0) {
            FILE *f = tmpfile();
            CHECK_OK(qm_topo_graph_dot(g, f, NULL));
            char *dot = slurp(f);
            CHECK(strstr(dot, "  \"n0.g0\" -- \"n0.g1\" [label=\"nvlink 56.2 GB/s\"];\n") != NULL);
            CHECK(strstr(dot, "    \"n0.numa0\" [shape=ellipse, label=\"n0.numa0\\nnuma\"];\n") != NULL);
            free(dot);
            fclose(f);
        }
        qm_topo_graph_destroy(g);
        tb_free(&b);
    }
}

/* ---- a set hanging off one switch: the matrix-free answers equal the matrix's ---------------- */

static void test_uniform_hub(void)
{
    for (int variant = 0; variant < 3; ++variant) {
        /* 0: 4 GPUs on one NVSwitch, each also on its own PCIe switch: uniform;
         * 1: g2's NVSwitch port is slower: not uniform (the matrix answers);
         * 2: g1 and g3 also have a direct NVLink faster than the switch pair: not uniform */
        tb b;
        tb_init(&b, "hub4", 1, 16, 16);
        int h = tb_host(&b, "n0");
        int numa = tb_node(&b, "n0.numa0", QM_NODE_NUMA, h, -1);
        int nvs = tb_node(&b, "n0.nvs", QM_NODE_NVSWITCH, h, -1);
        int g[4];
        for (int i = 0; i < 4; ++i) {
            char id[16];
            snprintf(id, sizeof id, "n0.sw%d", i);
            int sw = tb_node(&b, id, QM_NODE_PCIE_SWITCH, h, numa);
            snprintf(id, sizeof id, "n0.g%d", i);
            g[i] = tb_gpu(&b, id, h, numa, 4.8e12);
            tb_link(&b, g[i], nvs, QM_LINK_NVLINK, variant == 1 && i == 2 ? 400e9 : 450e9);
            tb_link(&b, numa, sw, QM_LINK_PCIE, 63e9);
            tb_link(&b, sw, g[i], QM_LINK_PCIE, 63e9);
        }
        if (variant == 2)
            tb_link(&b, g[1], g[3], QM_LINK_NVLINK, 900e9);
        b.t.efficiency[QM_LINK_NVLINK] = 0.824;
        qm_topo_graph *gr = make_graph(&b);
        CHECK(gr != NULL);
        const int rev[4] = {g[3], g[2], g[1], g[0]};
        int hub = -1;
        qm_topo_pair pair = {0};
        const bool uni = qm_topo_graph_uniform_hub(gr, rev, 4, &hub, &pair);
        CHECK(uni == (variant == 0));
        if (variant == 0) {
            CHECK_EQ_U64(hub, nvs);
            CHECK(pair.peer);
            CHECK_EQ_U64(pair.cls, QM_LINK_NVLINK);
            CHECK_DBL(pair.bw_bytes_per_s, 450e9 * 0.824);
            CHECK_NEAR(pair.latency_s, 2 * LAT_NVLINK);
            CHECK_EQ_U64(pair.hops, 2);
        }
        /* the conveniences (matrix-free when uniform) agree with the matrix itself */
        qm_topo_matrix *m = NULL;
        CHECK_OK(qm_topo_matrix_create(gr, rev, 4, &m, NULL));
        int best_m = -1, best_c = -1, order_m[4], order_c[4];
        CHECK_OK(qm_topo_matrix_best_connected(m, &best_m, NULL));
        CHECK_OK(qm_topo_graph_best_connected(gr, rev, 4, &best_c, NULL));
        CHECK_EQ_U64(best_c, best_m);
        CHECK_OK(qm_topo_matrix_affinity_order(m, order_m, NULL));
        CHECK_OK(qm_topo_graph_affinity_order(gr, rev, 4, order_c, NULL));
        for (int i = 0; i < 4; ++i)
            CHECK_EQ_U64(order_c[i], order_m[i]);
        qm_topo_pair peers[4];
        CHECK_OK(qm_topo_graph_best_peers(gr, rev, 4, peers, NULL));
        for (int i = 0; i < 4; ++i) {
            if (variant == 0) { /* every pair of the matrix is the hub pair */
                for (int j = 0; j < 4; ++j) {
                    const qm_topo_pair *q = qm_topo_matrix_get(m, rev[i], rev[j]);
                    if (i != j)
                        CHECK(q->cls == pair.cls && q->bw_bytes_per_s == pair.bw_bytes_per_s &&
                              q->hops == 2 && q->latency_s == pair.latency_s);
                }
                CHECK_DBL(peers[i].bw_bytes_per_s, 450e9 * 0.824);
            }
        }
        if (variant == 0) {
            CHECK_EQ_U64(best_c, g[3]); /* all tie: the first given */
            CHECK_EQ_U64(order_c[1], g[2]);
        } else if (variant == 1) {
            CHECK(best_c != g[2]); /* its slower port loses the bandwidth sum */
            CHECK_DBL(peers[1].bw_bytes_per_s, 400e9 * 0.824); /* g2 (positions in rev) */
            CHECK_DBL(peers[2].bw_bytes_per_s, 450e9 * 0.824); /* g1 */
        } else {
            for (int k = 0; k < 3; k += 2) { /* g3 and g1: the direct link */
                CHECK_EQ_U64(peers[k].hops, 1);
                CHECK_DBL(peers[k].bw_bytes_per_s, 900e9 * 0.824);
            }
            CHECK_EQ_U64(peers[1].hops, 2); /* g2: through the switch */
        }
        /* a repeated device or a non-GPU node is never uniform (the matrix reports it) */
        const int dup[3] = {g[0], g[1], g[0]};
        CHECK(!qm_topo_graph_uniform_hub(gr, dup, 3, NULL, NULL));
        const int withnode[2] = {g[0], nvs};
        CHECK(!qm_topo_graph_uniform_hub(gr, withnode, 2, NULL, NULL));
        CHECK(qm_topo_graph_best_connected(gr, dup, 3, &best_c, NULL) == QM_E_ARG);
        qm_topo_matrix_destroy(m);
        qm_topo_graph_destroy(gr);
        tb_free(&b);
    }
}

/* ---- (e) per-direction bandwidths ------------------------------------------------------------ */

static void test_asymmetric(void)
{
    tb b;
    tb_init(&b, "asym", 1, 8, 8);
    int h = tb_host(&b, "n0");
    int numa = tb_node(&b, "n0.numa0", QM_NODE_NUMA, h, -1);
    int sw = tb_node(&b, "n0.sw0", QM_NODE_PCIE_SWITCH, h, numa);
    int g0 = tb_gpu(&b, "n0.g0", h, numa, 0); /* no HBM figure */
    int g1 = tb_gpu(&b, "n0.g1", h, numa, 0);
    tb_link2(&b, numa, sw, QM_LINK_PCIE, 60e9, 58e9);
    int l0 = tb_link2(&b, sw, g0, QM_LINK_PCIE, 53e9, 55e9);
    int l1 = tb_link(&b, sw, g1, QM_LINK_PCIE, 54e9);
    qm_topo_graph *g = make_graph(&b);
    qm_topo_path p;
    CHECK_OK(qm_topo_graph_ingest_path(g, g0, true, &p, NULL));
    CHECK_DBL(p.bw_bytes_per_s, 53e9); /* min(60, 53) host -> device */
    CHECK_OK(qm_topo_graph_ingest_path(g, g0, false, &p, NULL));
    CHECK_DBL(p.bw_bytes_per_s, 55e9); /* min(55, 58) device -> host */
    CHECK_EQ_U64(p.src, g0);
    CHECK_EQ_U64(p.dst, numa);
    p = path_of(g, g0, g1);
    CHECK_DBL(p.bw_bytes_per_s, 54e9); /* min(55, 54) */
    CHECK_EQ_U64(p.links[0], l0);
    CHECK(!p.a_to_b[0]);
    CHECK_EQ_U64(p.links[1], l1);
    CHECK(p.a_to_b[1]);
    p = path_of(g, g1, g0);
    CHECK_DBL(p.bw_bytes_per_s, 53e9); /* min(54, 53) */

    int devs[2] = {g1, g0};
    qm_topo_matrix *m = NULL;
    CHECK_OK(qm_topo_matrix_create(g, devs, 2, &m, NULL));
    CHECK_DBL(qm_topo_matrix_get(m, g0, g1)->bw_bytes_per_s, 54e9);
    CHECK_DBL(qm_topo_matrix_get(m, g1, g0)->bw_bytes_per_s, 53e9);
    CHECK(isinf(qm_topo_matrix_get(m, g0, g0)->bw_bytes_per_s)); /* no HBM figure */
    CHECK_EQ_U64(m->nodes[0], g1);
    json_t *js = NULL;
    CHECK_OK(qm_topo_matrix_json(m, &js, NULL));
    json_t *c00 = json_array_get(json_array_get(json_object_get(js, "matrix"), 0), 0);
    CHECK(json_is_null(json_object_get(c00, "bw_bytes_per_s")));
    json_decref(js);
    qm_topo_matrix_destroy(m);

    FILE *f = tmpfile();
    CHECK_OK(qm_topo_graph_dot(g, f, NULL));
    char *dot = slurp(f);
    CHECK(strstr(dot, "  \"n0.sw0\" -- \"n0.g0\" [label=\"pcie 53.0 GB/s / 55.0 GB/s\"];\n") != NULL);
    free(dot);
    fclose(f);
    qm_topo_graph_destroy(g);
    tb_free(&b);
}

/* ---- where a one-label-per-node Dijkstra goes wrong ------------------------------------------ */

static void test_pareto_labels(void)
{
    /* (1) At u, the best path is nvlink/10 GB/s but a pcie/100 GB/s one exists; beyond u a pcie link
     * follows, so the pcie prefix wins: s -> y -> u -> v = pcie, 100 GB/s, 3 hops. */
    {
        tb b;
        tb_init(&b, "pareto1", 1, 8, 8);
        int h = tb_host(&b, "n0");
        int s = tb_gpu(&b, "s", h, -1, 0);
        int u = tb_node(&b, "u", QM_NODE_PCIE_SWITCH, h, -1);
        int y = tb_node(&b, "y", QM_NODE_PCIE_SWITCH, h, -1);
        int v = tb_gpu(&b, "v", h, -1, 0);
        tb_link(&b, s, u, QM_LINK_NVLINK, 10e9);
        int l_sy = tb_link(&b, s, y, QM_LINK_PCIE, 100e9);
        int l_yu = tb_link(&b, y, u, QM_LINK_PCIE, 100e9);
        int l_uv = tb_link(&b, u, v, QM_LINK_PCIE, 100e9);
        qm_topo_graph *g = make_graph(&b);
        qm_topo_path p = path_of(g, s, u);
        CHECK_EQ_U64(p.cls, QM_LINK_NVLINK);
        CHECK_DBL(p.bw_bytes_per_s, 10e9);
        p = path_of(g, s, v);
        CHECK_EQ_U64(p.cls, QM_LINK_PCIE);
        CHECK_DBL(p.bw_bytes_per_s, 100e9);
        CHECK_EQ_U64(p.hops, 3);
        CHECK_EQ_U64(p.links[0], l_sy);
        CHECK_EQ_U64(p.links[1], l_yu);
        CHECK_EQ_U64(p.links[2], l_uv);
        qm_topo_graph_destroy(g);
        tb_free(&b);
    }
    /* (2) At u, the best path is nvlink/100 GB/s in 3 hops but nvlink/50 GB/s in 1 hop exists; a
     * 10 GB/s link follows, so both reach v at pcie/10 GB/s and the shorter wins: 2 hops. */
    {
        tb b;
        tb_init(&b, "pareto2", 1, 8, 8);
        int h = tb_host(&b, "n0");
        int s = tb_gpu(&b, "s", h, -1, 0);
        int x1 = tb_node(&b, "x1", QM_NODE_NVSWITCH, h, -1);
        int x2 = tb_node(&b, "x2", QM_NODE_NVSWITCH, h, -1);
        int u = tb_node(&b, "u", QM_NODE_NVSWITCH, h, -1);
        int v = tb_gpu(&b, "v", h, -1, 0);
        int l_su = tb_link(&b, s, u, QM_LINK_NVLINK, 50e9);
        tb_link(&b, s, x1, QM_LINK_NVLINK, 100e9);
        tb_link(&b, x1, x2, QM_LINK_NVLINK, 100e9);
        tb_link(&b, x2, u, QM_LINK_NVLINK, 100e9);
        int l_uv = tb_link(&b, u, v, QM_LINK_PCIE, 10e9);
        qm_topo_graph *g = make_graph(&b);
        qm_topo_path p = path_of(g, s, u);
        CHECK_DBL(p.bw_bytes_per_s, 100e9);
        CHECK_EQ_U64(p.hops, 3);
        p = path_of(g, s, v);
        CHECK_EQ_U64(p.cls, QM_LINK_PCIE);
        CHECK_DBL(p.bw_bytes_per_s, 10e9);
        CHECK_EQ_U64(p.hops, 2);
        CHECK_EQ_U64(p.links[0], l_su);
        CHECK_EQ_U64(p.links[1], l_uv);
        /* bandwidth beats hops: s -> u is 3 hops at 100 GB/s rather than 1 hop at 50 GB/s */
        qm_topo_graph_destroy(g);
        tb_free(&b);
    }
}

/* ---- ties, transit and the cache ------------------------------------------------------------- */

static void test_ties_and_transit(void)
{
    tb b;
    tb_init(&b, "ties", 1, 8, 8);
    int h = tb_host(&b, "n0");
    int g0 = tb_gpu(&b, "g0", h, -1, 0);
    int g1 = tb_gpu(&b, "g1", h, -1, 0);
    int g2 = tb_gpu(&b, "g2", h, -1, 0);
    int swb = tb_node(&b, "swB", QM_NODE_PCIE_SWITCH, h, -1); /* lower index than swA */
    int swa = tb_node(&b, "swA", QM_NODE_PCIE_SWITCH, h, -1);
    /* links to swA first, so link order alone would pick swA */
    tb_link(&b, g0, swa, QM_LINK_PCIE, 32e9);
    tb_link(&b, g1, swa, QM_LINK_PCIE, 32e9);
    tb_link(&b, g0, swb, QM_LINK_PCIE, 32e9);
    tb_link(&b, g1, swb, QM_LINK_PCIE, 32e9);
    /* g1 - g2 only by NVLink: g0 -> g2 would have to pass through g1 */
    tb_link(&b, g1, g2, QM_LINK_NVLINK, 100e9);
    qm_topo_graph *g = make_graph(&b);
    for (int rep = 0; rep < 2; ++rep) { /* the second time from the cache */
        qm_topo_path p = path_of(g, g0, g1);
        CHECK_EQ_U64(p.hops, 2);
        CHECK_EQ_U64(p.nodes[1], swb); /* equal paths: the lower predecessor node index */
        p = path_of(g, g0, g2);
        CHECK(!p.found); /* GPUs do not forward */
        CHECK_EQ_U64(p.hops, 0);
        CHECK_DBL(p.bw_bytes_per_s, 0);
    }
    qm_topo_path p = path_of(g, g1, g2);
    CHECK(p.found);
    CHECK_EQ_U64(p.cls, QM_LINK_NVLINK);
    p = path_of(g, g0, g1); /* back to g0's tree after g1's */
    CHECK_EQ_U64(p.nodes[1], swb);

    /* E-DISCONNECTED names both devices by id */
    int devs[3] = {g0, g1, g2};
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_check_connected(g, devs, 3, &st) == QM_E_DISCONNECTED);
    CHECK_ERR(st, QM_E_DISCONNECTED,
              "topology: no path from device g0 to device g2 (nodes 0 -> 2, in a set of 3 devices); "
              "connect them with a link or fabric, or leave one of them out");
    int devs2[2] = {g2, g1};
    CHECK_OK(qm_topo_graph_check_connected(g, devs2, 2, NULL));
    qm_topo_graph_destroy(g);
    tb_free(&b);
}

/* ---- validation ------------------------------------------------------------------------------ */

static void test_validation(void)
{
    pcie2 p;
    build_pcie2(&p, 22e9);
    qm_status st;
    qm_topo_graph *g = (qm_topo_graph *)&st; /* must be reset to NULL on failure */

    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(NULL, &g, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: topology and out must not be NULL");
    CHECK(g == NULL);
    CHECK(qm_topo_graph_create(&p.b.t, NULL, NULL) == QM_E_ARG);

    p.b.t.efficiency[QM_LINK_SYS] = 0;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE,
              "topology: efficiency of class sys must be in (0, 1] (got 0); set defaults.efficiency.sys");
    p.b.t.efficiency[QM_LINK_SYS] = 1;
    p.b.t.hbm_efficiency = 1.5;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "hbm efficiency must be in (0, 1] (got 1.5)");
    p.b.t.hbm_efficiency = 1;

    p.b.t.links[p.l_sys].b = p.b.t.links[p.l_sys].a;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: link 0 joins nodes 0 and 0, which must be distinct nodes below 8");
    p.b.t.links[p.l_sys].b = 99;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "joins nodes 0 and 99");
    p.b.t.links[p.l_sys].b = p.numa[1];
    p.b.t.links[p.l_up[1]].bw_ba_bytes_per_s = NAN;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE,
              "topology: link 2 (n0.numa1 - n0.sw1) has a bad bandwidth (a->b 6.4e+10, b->a nan B/s)");
    p.b.t.links[p.l_up[1]].bw_ba_bytes_per_s = 64e9;
    p.b.t.nodes[p.sw[0]].kind = (qm_node_kind)17;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_create(&p.b.t, &g, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: node 2 (n0.sw0) has an unknown kind (17)");
    p.b.t.nodes[p.sw[0]].kind = QM_NODE_PCIE_SWITCH;

    g = make_graph(&p.b);
    CHECK(g != NULL);
    CHECK_EQ_U64(qm_topo_graph_node_count(g), 8);
    CHECK(qm_topo_graph_topology(g) == &p.b.t);
    CHECK_STR(qm_topo_graph_node_id(g, p.g[3]), "n0.g3");
    CHECK_STR(qm_topo_graph_node_id(g, 8), "");
    CHECK_STR(qm_topo_node_kind_name(QM_NODE_NVSWITCH), "nvswitch");
    CHECK(qm_topo_node_kind_name((qm_node_kind)9) == NULL);
    CHECK_STR(qm_topo_class_name(QM_LINK_C2C), "c2c");
    CHECK(qm_topo_class_name(QM_LINK_CLASS_COUNT_) == NULL);
    CHECK_DBL(qm_topo_graph_link_bw(g, p.l_up[0], false), 48e9);
    CHECK_DBL(qm_topo_graph_link_bw(g, 99, true), 0);

    int node = 5;
    CHECK_OK(qm_topo_graph_find(g, "n0.sw1", &node, NULL));
    CHECK_EQ_U64(node, p.sw[1]);
    qm_status_clear(&st);
    CHECK(qm_topo_graph_find(g, "n0.g9", &node, &st) == QM_E_UNKNOWN_REF);
    CHECK_ERR(st, QM_E_UNKNOWN_REF, "topology: no node has the id 'n0.g9' (8 nodes)");
    CHECK_EQ_U64(node, (unsigned long long)-1);

    qm_topo_path path;
    qm_status_clear(&st);
    CHECK(qm_topo_graph_path(g, 0, 8, &path, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: path 0 -> 8: node out of range (8 nodes)");
    qm_status_clear(&st);
    CHECK(qm_topo_graph_ingest_path(g, p.sw[0], true, &path, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: the device is node 2 (n0.sw0), a pcie_switch, not a GPU");

    qm_topo_matrix *m = (qm_topo_matrix *)&st;
    int bad[3] = {p.g[0], p.sw[1], p.g[1]};
    qm_status_clear(&st);
    CHECK(qm_topo_matrix_create(g, bad, 3, &m, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG,
              "topology: device set entry 1 is node 3 (n0.sw1), a pcie_switch, not a GPU");
    CHECK(m == NULL);
    int dup[3] = {p.g[0], p.g[2], p.g[0]};
    qm_status_clear(&st);
    CHECK(qm_topo_matrix_create(g, dup, 3, &m, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG,
              "topology: device n0.g0 (node 4) appears twice in the device set (entries 0 and 2)");
    qm_status_clear(&st);
    CHECK(qm_topo_matrix_create(g, dup, 0, &m, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: a device set needs at least 1 device (got 0)");
    int far[1] = {-3};
    qm_status_clear(&st);
    CHECK(qm_topo_graph_best_connected(g, far, 1, &node, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "topology: device set entry 0 is node -3, out of range (8 nodes)");
    qm_status_clear(&st);
    CHECK(qm_topo_matrix_best_connected(NULL, &node, &st) == QM_E_ARG);
    CHECK(qm_topo_matrix_affinity_order(NULL, &node, NULL) == QM_E_ARG);
    CHECK(qm_topo_matrix_check_connected(NULL, NULL) == QM_E_ARG);
    CHECK(qm_topo_matrix_print(NULL, stdout, NULL) == QM_E_ARG);
    CHECK(qm_topo_graph_dot(g, NULL, NULL) == QM_E_ARG);
    json_t *js = (json_t *)&st;
    CHECK(qm_topo_graph_matrix_json(g, far, 1, &js, NULL) == QM_E_ARG);
    CHECK(js == NULL);
    CHECK_OK(qm_topo_graph_matrix_json(g, p.g, 1, &js, NULL));
    CHECK_EQ_U64(json_array_size(json_object_get(js, "matrix")), 1);
    json_decref(js);

    /* a one-device set is its own gather device and order */
    CHECK_OK(qm_topo_graph_best_connected(g, &p.g[3], 1, &node, NULL));
    CHECK_EQ_U64(node, p.g[3]);
    CHECK_OK(qm_topo_graph_check_connected(g, &p.g[3], 1, NULL));

    /* a write error is E-IO */
    FILE *ro = fopen("/dev/null", "r");
    if (ro) {
        qm_topo_matrix *mm = NULL;
        CHECK_OK(qm_topo_matrix_create(g, p.g, 2, &mm, NULL));
        qm_status_clear(&st);
        CHECK(qm_topo_matrix_print(mm, ro, &st) == QM_E_IO);
        CHECK_ERR(st, QM_E_IO, "topology: writing the device matrix failed (2 devices)");
        qm_status_clear(&st);
        CHECK(qm_topo_graph_dot(g, ro, &st) == QM_E_IO);
        CHECK_ERR(st, QM_E_IO, "topology: writing the Graphviz graph failed (8 nodes, 7 links)");
        qm_topo_matrix_destroy(mm);
        fclose(ro);
    }
    qm_topo_graph_destroy(g);
    qm_topo_graph_destroy(NULL);
    qm_topo_matrix_destroy(NULL);
    tb_free(&p.b);
}

/* ---- 1024 hosts x 8 GPUs, queried without all-pairs storage ---------------------------------- */

static void test_scale(void)
{
    enum { HOSTS = 1024, PER = 8 };
    tb b;
    /* per host: 2 numa, 4 pcie switches, 1 nvswitch, 8 GPUs, 8 NICs; one fabric switch */
    tb_init(&b, "dgx1024", HOSTS, HOSTS * 23 + 1, HOSTS * 29);
    int fab = tb_node(&b, "ib", QM_NODE_FABRIC_SWITCH, -1, -1);
    static int gpu[HOSTS][PER];
    for (int h = 0; h < HOSTS; ++h) {
        char id[48];
        snprintf(id, sizeof id, "n%d", h);
        int host = tb_host(&b, id);
        int numa[2], sw[4];
        for (int k = 0; k < 2; ++k) {
            snprintf(id, sizeof id, "n%d.numa%d", h, k);
            numa[k] = tb_node(&b, id, QM_NODE_NUMA, host, -1);
        }
        tb_link(&b, numa[0], numa[1], QM_LINK_SYS, 40e9);
        snprintf(id, sizeof id, "n%d.nvs", h);
        int nvs = tb_node(&b, id, QM_NODE_NVSWITCH, host, -1);
        for (int s = 0; s < 4; ++s) {
            snprintf(id, sizeof id, "n%d.sw%d", h, s);
            sw[s] = tb_node(&b, id, QM_NODE_PCIE_SWITCH, host, numa[s / 2]);
            tb_link(&b, numa[s / 2], sw[s], QM_LINK_PCIE, 64e9);
        }
        for (int i = 0; i < PER; ++i) {
            snprintf(id, sizeof id, "n%d.g%d", h, i);
            gpu[h][i] = tb_gpu(&b, id, host, numa[i / 4], 4.8e12);
            tb_link(&b, sw[i / 2], gpu[h][i], QM_LINK_PCIE, 64e9);
            tb_link(&b, gpu[h][i], nvs, QM_LINK_NVLINK, 450e9);
            snprintf(id, sizeof id, "n%d.ib%d", h, i);
            int nic = tb_nic(&b, id, host, numa[i / 4], sw[i / 2], 50e9);
            tb_link(&b, nic, fab, QM_LINK_NET, 50e9);
        }
    }
    clock_t t0 = clock();
    qm_topo_graph *g = make_graph(&b);
    CHECK_EQ_U64(qm_topo_graph_node_count(g), HOSTS * 23 + 1);
    qm_topo_path p = path_of(g, gpu[0][0], gpu[HOSTS - 1][7]);
    CHECK(p.found);
    CHECK_EQ_U64(p.cls, QM_LINK_NET);
    CHECK_DBL(p.bw_bytes_per_s, 50e9);
    CHECK_EQ_U64(p.hops, 6);
    CHECK_STR(qm_topo_graph_node_id(g, p.nodes[2]), "n0.ib0"); /* the GPU's own NIC */
    /* n1023.ib6 and .ib7 share g7's switch: equal paths, the lower node index wins */
    CHECK_STR(qm_topo_graph_node_id(g, p.nodes[4]), "n1023.ib6");
    p = path_of(g, gpu[0][0], gpu[0][5]);
    CHECK_EQ_U64(p.cls, QM_LINK_NVLINK);
    CHECK_DBL(p.bw_bytes_per_s, 450e9);
    CHECK_OK(qm_topo_graph_ingest_path(g, gpu[512][6], true, &p, NULL));
    CHECK_EQ_U64(p.cls, QM_LINK_PCIE);
    CHECK_DBL(p.bw_bytes_per_s, 64e9);
    CHECK_STR(qm_topo_graph_node_id(g, p.src), "n512.numa1");

    /* a 16-device request over two hosts: 16 searches, 256 pairs */
    int devs[16];
    for (int i = 0; i < 8; ++i) {
        devs[i] = gpu[7][i];
        devs[8 + i] = gpu[900][i];
    }
    qm_topo_matrix *m = NULL;
    CHECK_OK(qm_topo_matrix_create(g, devs, 16, &m, NULL));
    CHECK_OK(qm_topo_matrix_check_connected(m, NULL));
    CHECK_EQ_U64(qm_topo_matrix_get(m, gpu[7][3], gpu[900][3])->cls, QM_LINK_NET);
    CHECK_EQ_U64(qm_topo_matrix_get(m, gpu[900][1], gpu[900][6])->cls, QM_LINK_NVLINK);
    int order[16];
    CHECK_OK(qm_topo_matrix_affinity_order(m, order, NULL));
    for (int i = 0; i < 16; ++i)
        CHECK_EQ_U64(order[i], devs[i]); /* host by host */
    qm_topo_matrix_destroy(m);
    printf("scale: %d nodes, %d links: graph, 4 searches and a 16-device matrix in %.2f s\n",
           qm_topo_graph_node_count(g), qm_topo_graph_link_count(g),
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    qm_topo_graph_destroy(g);
    tb_free(&b);
}

int main(void)
{
    test_nvswitch();
    test_uniform_hub();
    test_pcie_two_sockets();
    test_two_hosts_ib();
    test_implicit_device_links();
    test_nvlink_bridge();
    test_asymmetric();
    test_pareto_labels();
    test_ties_and_transit();
    test_validation();
    test_scale();
    return qm_test_end("test_topology");
}
