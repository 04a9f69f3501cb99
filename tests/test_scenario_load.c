/* test_scenario_load.c — the qmesh/1 loader, dumper, built-in default mesh and `topo validate`.
 *
 * Correctness: exact values of every field of a scenario that uses every key; the default mesh;
 * load -> dump -> load gives the same topology (inline scenarios, the default, and with
 * `--dir DIR` every .yaml file of DIR, which must also cite sources); a generated 1024-host x 8-GPU
 * scenario loads in well under a second. Validation: located errors with exact line:col and message
 * text, every error of a file collected (up to the cap), edge inputs (empty, NUL bytes, huge,
 * unreadable), and the CLI's output and exit statuses.
 */
#include "scenario_loader.h"
#include "testlib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ----------------------------------------------------------------------------------- */

static qm_topology *load_ok(const char *yaml, const char *name)
{
    qm_topology *t = NULL;
    qm_diags d;
    qm_diags_init(&d);
    qm_status st;
    qm_status_clear(&st);
    if (qm_scenario_load_string(yaml, strlen(yaml), name, &t, &d, &st) != QM_OK) {
        qm_test_fail(__FILE__, __LINE__, "%s did not load: %s", name, st.msg);
        qm_diags_print(&d, stderr);
    }
    CHECK(d.n == 0);
    qm_diags_fini(&d);
    return t;
}

/* Load must fail with code at line:col and a first message containing part. */
static void expect_err(const char *yaml, qm_code code, int line, int col, const char *part,
                       int src_line)
{
    qm_topology *t = (qm_topology *)&t; /* must come back NULL */
    qm_diags d;
    qm_diags_init(&d);
    qm_status st;
    qm_status_clear(&st);
    qm_code rc = qm_scenario_load_string(yaml, strlen(yaml), "e.yaml", &t, &d, &st);
    qm_test_checks++;
    if (rc != code || st.code != code || st.line != line || st.col != col ||
        !strstr(st.msg, part) || t != NULL || d.n < 1 || strcmp(st.file, "e.yaml") != 0) {
        qm_test_fail(__FILE__, src_line, "expected %s at %d:%d containing '%s', got %s at %d:%d: %s",
                     qm_code_name(code), line, col, part, qm_code_name(rc), st.line, st.col,
                     st.msg);
        qm_diags_print(&d, stderr);
    } else {
        /* the first diagnostic is the status */
        CHECK(d.items[0].code == code && d.items[0].line == line && d.items[0].col == col);
        CHECK_STR(d.items[0].msg, st.msg);
    }
    qm_diags_fini(&d);
}
#define EXPECT_ERR(yaml, code, line, col, part) expect_err((yaml), (code), (line), (col), (part), __LINE__)

/* A growing text buffer for generated scenarios. */
typedef struct text {
    char *s;
    size_t n, cap;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k >= 0 && b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + (size_t)k + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            return;
        b->s = s;
        b->cap = cap;
    }
}

static char *read_all(FILE *f, size_t *len)
{
    long n;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- topology comparison (every field but source locations) ------------------------------------- */

static char why[512];

#define DIFF(cond, ...)                                                                            \
    do {                                                                                           \
        if (cond) {                                                                                \
            snprintf(why, sizeof why, __VA_ARGS__);                                                \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

static bool same_request(const qm_request *a, const qm_request *b)
{
    return a->qubits == b->qubits && a->dtype == b->dtype && a->policy == b->policy &&
           a->batch == b->batch && a->features == b->features && a->encoding == b->encoding &&
           strcmp(a->gather, b->gather) == 0 && a->ranks == b->ranks;
}

static bool same_expect(const qm_case_expect *a, const qm_case_expect *b)
{
    if (a->feasible != b->feasible || a->has_error != b->has_error ||
        (a->has_error && a->error != b->error) || a->has_shards != b->has_shards ||
        a->shards != b->shards || a->has_pages != b->has_pages || a->pages != b->pages ||
        a->has_shard_bytes != b->has_shard_bytes || a->shard_bytes != b->shard_bytes ||
        a->n_devices != b->n_devices || a->n_ranks != b->n_ranks ||
        a->has_gather != b->has_gather || a->gather_feasible != b->gather_feasible ||
        strcmp(a->gather_target, b->gather_target) != 0 ||
        a->has_max_qubits != b->has_max_qubits || a->max_qubits_c64 != b->max_qubits_c64 ||
        a->max_qubits_c128 != b->max_qubits_c128 || a->has_min_headroom != b->has_min_headroom ||
        a->min_headroom_bytes != b->min_headroom_bytes)
        return false;
    for (int i = 0; i < a->n_devices; ++i)
        if (strcmp(a->devices[i], b->devices[i]) != 0)
            return false;
    for (int i = 0; i < a->n_ranks; ++i)
        if (a->ranks[i] != b->ranks[i])
            return false;
    for (int p = 0; p < QM_PHASE_COUNT_; ++p) {
        const qm_expect_estimate *x = &a->estimates[p], *y = &b->estimates[p];
        if (x->set != y->set || (x->set && (x->value_s != y->value_s || x->rel_tol != y->rel_tol ||
                                            x->kind != y->kind)))
            return false;
    }
    return true;
}

static bool topo_equal(const qm_topology *a, const qm_topology *b)
{
    DIFF(strcmp(a->name, b->name), "name '%s' vs '%s'", a->name, b->name);
    DIFF(!a->description != !b->description ||
             (a->description && strcmp(a->description, b->description)),
         "description");
    DIFF(a->n_sources != b->n_sources, "n_sources %d vs %d", a->n_sources, b->n_sources);
    for (int i = 0; i < a->n_sources; ++i)
        DIFF(strcmp(a->sources[i], b->sources[i]), "source %d", i);
    DIFF(a->default_reserve_bytes != b->default_reserve_bytes, "default reserve");
    DIFF(a->hbm_efficiency != b->hbm_efficiency, "hbm efficiency");
    DIFF(a->host_link_bw_bytes_per_s != b->host_link_bw_bytes_per_s, "host_link");
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        DIFF(a->efficiency[c] != b->efficiency[c] || a->latency_s[c] != b->latency_s[c],
             "class %d efficiency or latency", c);
    DIFF(a->n_device_types != b->n_device_types, "n_device_types");
    for (int i = 0; i < a->n_device_types; ++i) {
        const qm_device_type *x = &a->device_types[i], *y = &b->device_types[i];
        DIFF(strcmp(x->name, y->name) || x->memory_bytes != y->memory_bytes ||
                 x->hbm_bw_bytes_per_s != y->hbm_bw_bytes_per_s || x->sm_count != y->sm_count ||
                 strcmp(x->arch, y->arch),
             "device type %d", i);
    }
    DIFF(a->n_hosts != b->n_hosts, "n_hosts");
    for (int i = 0; i < a->n_hosts; ++i)
        DIFF(strcmp(a->hosts[i].id, b->hosts[i].id) ||
                 a->hosts[i].memory_bytes != b->hosts[i].memory_bytes,
             "host %d", i);
    DIFF(a->n_nodes != b->n_nodes, "n_nodes %d vs %d", a->n_nodes, b->n_nodes);
    for (int i = 0; i < a->n_nodes; ++i) {
        const qm_node *x = &a->nodes[i], *y = &b->nodes[i];
        DIFF(strcmp(x->id, y->id) || x->kind != y->kind || x->host != y->host ||
                 x->numa != y->numa || x->type != y->type || x->memory_bytes != y->memory_bytes ||
                 x->reserve_bytes != y->reserve_bytes ||
                 x->hbm_bw_bytes_per_s != y->hbm_bw_bytes_per_s ||
                 x->nic_bw_bytes_per_s != y->nic_bw_bytes_per_s || x->attach != y->attach,
             "node %d ('%s' vs '%s')", i, x->id, y->id);
    }
    DIFF(a->n_links != b->n_links, "n_links %d vs %d", a->n_links, b->n_links);
    for (int i = 0; i < a->n_links; ++i) {
        const qm_link *x = &a->links[i], *y = &b->links[i];
        DIFF(x->a != y->a || x->b != y->b || x->cls != y->cls ||
                 x->bw_ab_bytes_per_s != y->bw_ab_bytes_per_s ||
                 x->bw_ba_bytes_per_s != y->bw_ba_bytes_per_s || x->latency_s != y->latency_s ||
                 x->fabric != y->fabric,
             "link %d", i);
    }
    DIFF(a->n_fabrics != b->n_fabrics, "n_fabrics");
    for (int i = 0; i < a->n_fabrics; ++i) {
        const qm_fabric *x = &a->fabrics[i], *y = &b->fabrics[i];
        DIFF(strcmp(x->id, y->id) || x->cls != y->cls || x->switch_node != y->switch_node ||
                 x->implicit_switch != y->implicit_switch || x->n_members != y->n_members ||
                 x->port_bw_bytes_per_s != y->port_bw_bytes_per_s || x->latency_s != y->latency_s,
             "fabric %d", i);
        for (int m = 0; m < x->n_members; ++m)
            DIFF(x->members[m] != y->members[m], "fabric %d member %d", i, m);
    }
    DIFF(a->ranks_given != b->ranks_given || a->n_ranks != b->n_ranks, "ranks");
    for (int i = 0; i < a->n_ranks; ++i) {
        const qm_rank_desc *x = &a->ranks[i], *y = &b->ranks[i];
        DIFF(x->rank != y->rank || x->host != y->host || x->n_devices != y->n_devices, "rank %d",
             i);
        for (int d = 0; d < x->n_devices; ++d)
            DIFF(x->devices[d] != y->devices[d], "rank %d device %d", i, d);
    }
    DIFF(a->n_cases != b->n_cases, "n_cases");
    for (int i = 0; i < a->n_cases; ++i) {
        DIFF(strcmp(a->cases[i].id, b->cases[i].id), "case %d id", i);
        DIFF(!same_request(&a->cases[i].request, &b->cases[i].request), "case %d request", i);
        DIFF(!same_expect(&a->cases[i].expect, &b->cases[i].expect), "case %d expect", i);
    }
    DIFF(a->n_gpus != b->n_gpus, "n_gpus");
    for (int i = 0; i < a->n_gpus; ++i)
        DIFF(a->gpus[i] != b->gpus[i], "gpu %d", i);
    return true;
}

/* load(dump(t)) == t, and dumping that again gives the same text. */
static void check_roundtrip(const qm_topology *t, const char *label)
{
    qm_status st;
    qm_status_clear(&st);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(qm_scenario_dump(t, f, &st) == QM_OK);
    size_t len = 0;
    char *text1 = read_all(f, &len);
    fclose(f);
    qm_topology *u = NULL;
    qm_diags d;
    qm_diags_init(&d);
    if (!text1 || qm_scenario_load_string(text1, len, label, &u, &d, &st) != QM_OK) {
        qm_test_fail(__FILE__, __LINE__, "%s: the dump does not load: %s\n%s", label, st.msg,
                     text1 ? text1 : "");
        qm_diags_print(&d, stderr);
    } else {
        qm_test_checks++;
        if (!topo_equal(t, u))
            qm_test_fail(__FILE__, __LINE__, "%s: load(dump(t)) differs: %s", label, why);
        FILE *g = tmpfile();
        if (g && qm_scenario_dump(u, g, &st) == QM_OK) {
            size_t len2 = 0;
            char *text2 = read_all(g, &len2);
            CHECK(text2 && len2 == len && memcmp(text1, text2, len) == 0);
            free(text2);
        }
        if (g)
            fclose(g);
    }
    qm_diags_fini(&d);
    qm_topology_destroy(u);
    free(text1);
}

/* ---- a scenario with every key ------------------------------------------------------------------ */

static const char *const sink_yaml =
    "schema: qmesh/1\n"
    "name: sink\n"
    "description: 'every key of qmesh/1, with \"quotes\" and a backslash \\'\n"
    "sources:\n"
    "  - H100 datasheet\n"
    "  - \"NCCL topo.h: 20.6 GB/s per NVLink4 link\"\n"
    "defaults:\n"
    "  reserve: 1 GiB\n"
    "  efficiency: {nvlink: 0.824, pcie: 0.762, hbm: 0.9}\n"
    "  latency: {nvlink: 0.9 us, net: 5 us}\n"
    "device_types:\n"
    "  - {name: h100, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, sm_count: 132, arch: sm_90}\n"
    "  - {name: a100, memory: 40 GiB, hbm_bandwidth: 1555 GB/s}\n"
    "hosts:\n"
    "  - id: n0\n"
    "    memory: 2 TiB\n"
    "    numa:\n"
    "      - {id: 0}\n"
    "      - {id: 1}\n"
    "    devices:\n"
    "      - {id: n0.g0, type: h100, numa: 0}\n"
    "      - {id: n0.g1, type: h100, numa: 1, memory: 81559 MiB, reserve: 2 GiB}\n"
    "      - {id: n0.g2, memory: 48 GB, hbm_bandwidth: 864 GB/s, numa: 1, reserve: 0 B}\n"
    "    switches:\n"
    "      - {id: n0.sw0, kind: pcie_switch, numa: 0}\n"
    "      - {id: n0.nvs, kind: nvswitch}\n"
    "    nics:\n"
    "      - {id: n0.ib0, speed: 400 Gb/s, numa: 0, attach: n0.sw0}\n"
    "  - id: n1\n"
    "    numa: [{id: 0}]\n"
    "    devices:\n"
    "      - {id: n1.g0, type: a100, numa: 0}\n"
    "    nics:\n"
    "      - {id: n1.ib0, speed: 200 Gb/s, numa: 0}\n"
    "links:\n"
    "  - {a: n0.numa0, b: n0.sw0, kind: pcie, bandwidth: 63 GB/s}\n"
    "  - {a: n0.sw0, b: n0.g0, kind: pcie, bandwidth: {a_to_b: 53 GB/s, b_to_a: 55.2 GB/s}, "
    "latency: 1.5 us}\n"
    "  - {a: n0.numa0, b: n0.numa1, kind: sys, bandwidth: 22 GB/s}\n"
    "  - {a: n0.numa1, b: n0.g2, kind: pcie, bandwidth: 31.5 GB/s}\n"
    "  - {a: n1.numa0, b: n1.g0, kind: pcie, bandwidth: 31.5 GB/s}\n"
    "  - {a: n1.numa0, b: n1.ib0, kind: pcie, bandwidth: 31.5 GB/s}\n"
    "fabrics:\n"
    "  - {id: n0.nvl, kind: nvlink, switch: n0.nvs, members: [n0.g0, n0.g1], "
    "port_bandwidth: 450 GB/s, latency: 0 us}\n"
    "  - {id: ib, kind: net, members: [n0.ib0, n1.ib0], port_bandwidth: 25 GB/s}\n"
    "ranks:\n"
    "  - {rank: 1, host: n1, devices: [n1.g0]}\n"
    "  - {rank: 0, host: n0, devices: [n0.g1, n0.g0, n0.g2]}\n"
    "cases:\n"
    "  - id: c1\n"
    "    request: {qubits: 30, dtype: complex128, policy: weighted, batch: 4, features: 1000,\n"
    "              encoding: angle, gather: n0.g1, ranks: 2}\n"
    "    expect:\n"
    "      feasible: true\n"
    "      shards: 4\n"
    "      pages: 8\n"
    "      shard_bytes: 4 GiB\n"
    "      devices: [n0.g1, n0.g0, n0.g2, n1.g0]\n"
    "      ranks: [0, 0, 0, 1]\n"
    "      gather: {feasible: true, target: host}\n"
    "      max_qubits: {complex64: 33, complex128: 32}\n"
    "      min_headroom: 0 B\n"
    "      estimates:\n"
    "        ingest: {value: 15.9 ms, rel_tol: 0.05}\n"
    "        gather: {value: 2 s, rel_tol: 0.5, kind: reality}\n"
    "  - id: c2\n"
    "    request: {qubits: 40}\n"
    "    expect: {feasible: false, error: E-CAPACITY, gather: {feasible: false}}\n";

static void test_sink(void)
{
    qm_topology *t = load_ok(sink_yaml, "sink.yaml");
    if (!t)
        return;
    CHECK_STR(t->file, "sink.yaml");
    CHECK_STR(t->name, "sink");
    CHECK(t->description && strcmp(t->description,
                                   "every key of qmesh/1, with \"quotes\" and a backslash \\") == 0);
    CHECK(t->n_sources == 2);
    CHECK_STR(t->sources[1], "NCCL topo.h: 20.6 GB/s per NVLink4 link");
    CHECK_EQ_U64(t->default_reserve_bytes, 1ull << 30);
    CHECK(t->efficiency[QM_LINK_NVLINK] == 0.824 && t->efficiency[QM_LINK_PCIE] == 0.762);
    CHECK(t->efficiency[QM_LINK_C2C] == 1.0 && t->efficiency[QM_LINK_NET] == 1.0);
    CHECK(t->hbm_efficiency == 0.9);
    CHECK(t->latency_s[QM_LINK_NVLINK] == 0.9e-6 && t->latency_s[QM_LINK_NET] == 5e-6);
    CHECK(t->latency_s[QM_LINK_C2C] == 0.6e-6 && t->latency_s[QM_LINK_PCIE] == 1e-6 &&
          t->latency_s[QM_LINK_SYS] == 1e-6); /* class defaults */

    CHECK(t->n_device_types == 2);
    CHECK_STR(t->device_types[0].name, "h100");
    CHECK_EQ_U64(t->device_types[0].memory_bytes, 85899345920ull);
    CHECK(t->device_types[0].hbm_bw_bytes_per_s == 3.35e12 && t->device_types[0].sm_count == 132);
    CHECK_STR(t->device_types[0].arch, "sm_90");
    CHECK(t->device_types[1].sm_count == 0 && t->device_types[1].arch[0] == '\0');
    CHECK(t->device_types[1].loc.line == 13 && t->device_types[1].loc.col == 5);

    CHECK(t->n_hosts == 2);
    CHECK_STR(t->hosts[1].id, "n1");
    CHECK_EQ_U64(t->hosts[0].memory_bytes, 2199023255552ull);
    CHECK_EQ_U64(t->hosts[1].memory_bytes, 0);
    /* nodes: per host NUMA nodes, devices, switches, NICs; then implicit fabric switches */
    static const char *const ids[] = {"n0.numa0", "n0.numa1", "n0.g0",    "n0.g1",
                                      "n0.g2",    "n0.sw0",   "n0.nvs",   "n0.ib0",
                                      "n1.numa0", "n1.g0",    "n1.ib0",   "ib"};
    static const qm_node_kind kinds[] = {QM_NODE_NUMA, QM_NODE_NUMA, QM_NODE_GPU,
                                         QM_NODE_GPU, QM_NODE_GPU, QM_NODE_PCIE_SWITCH,
                                         QM_NODE_NVSWITCH, QM_NODE_NIC, QM_NODE_NUMA,
                                         QM_NODE_GPU, QM_NODE_NIC, QM_NODE_FABRIC_SWITCH};
    static const int hosts[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, -1};
    static const int numas[] = {-1, -1, 0, 1, 1, 0, -1, 0, -1, 8, 8, -1};
    CHECK(t->n_nodes == 12);
    for (int i = 0; i < 12 && i < t->n_nodes; ++i) {
        CHECK_STR(t->nodes[i].id, ids[i]);
        CHECK(t->nodes[i].kind == kinds[i]);
        CHECK(t->nodes[i].host == hosts[i]);
        CHECK(t->nodes[i].numa == numas[i]);
    }
    const qm_node *g0 = &t->nodes[2], *g1 = &t->nodes[3], *g2 = &t->nodes[4];
    CHECK(g0->type == 0 && g0->memory_bytes == 85899345920ull && g0->reserve_bytes == 1ull << 30);
    CHECK(g1->type == 0 && g1->memory_bytes == 85520809984ull && g1->reserve_bytes == 2ull << 30);
    CHECK(g1->hbm_bw_bytes_per_s == 3.35e12);
    CHECK(g2->type == -1 && g2->memory_bytes == 48000000000ull && g2->reserve_bytes == 0);
    CHECK(g2->hbm_bw_bytes_per_s == 864e9);
    CHECK(g0->loc.line == 21 && g0->loc.col == 9);
    CHECK(t->nodes[7].nic_bw_bytes_per_s == 50e9 && t->nodes[7].attach == 5);
    CHECK(t->nodes[10].nic_bw_bytes_per_s == 25e9 && t->nodes[10].attach == -1);
    CHECK(t->nodes[9].type == 1 && t->nodes[9].memory_bytes == 40ull << 30);

    CHECK(t->n_gpus == 4);
    CHECK(t->gpus[0] == 2 && t->gpus[1] == 3 && t->gpus[2] == 4 && t->gpus[3] == 9);

    /* links: explicit ones first, then each fabric's member -> switch */
    CHECK(t->n_links == 10);
    const qm_link *l1 = &t->links[1];
    CHECK(l1->a == 5 && l1->b == 2 && l1->cls == QM_LINK_PCIE && l1->fabric == -1);
    CHECK(l1->bw_ab_bytes_per_s == 53e9 && l1->bw_ba_bytes_per_s == 55.2e9);
    CHECK(l1->latency_s == 1.5e-6 && t->links[0].latency_s < 0);
    CHECK(l1->loc.line == 37 && l1->loc.col == 5);
    CHECK(t->links[2].cls == QM_LINK_SYS && t->links[2].bw_ab_bytes_per_s == 22e9 &&
          t->links[2].bw_ba_bytes_per_s == 22e9);
    const qm_link *f0 = &t->links[6], *f3 = &t->links[9];
    CHECK(f0->a == 2 && f0->b == 6 && f0->cls == QM_LINK_NVLINK && f0->fabric == 0);
    CHECK(f0->bw_ab_bytes_per_s == 450e9 && f0->bw_ba_bytes_per_s == 450e9 && f0->latency_s == 0);
    CHECK(f0->loc.line == 43 && f0->loc.col == 5); /* expanded links point at their fabric */
    CHECK(f3->a == 10 && f3->b == 11 && f3->cls == QM_LINK_NET && f3->fabric == 1);
    CHECK(f3->bw_ab_bytes_per_s == 25e9 && f3->latency_s < 0);

    CHECK(t->n_fabrics == 2);
    CHECK_STR(t->fabrics[0].id, "n0.nvl");
    CHECK(t->fabrics[0].switch_node == 6 && !t->fabrics[0].implicit_switch);
    CHECK(t->fabrics[0].n_members == 2 && t->fabrics[0].members[1] == 3);
    CHECK(t->fabrics[1].switch_node == 11 && t->fabrics[1].implicit_switch);
    CHECK(t->fabrics[1].port_bw_bytes_per_s == 25e9 && t->fabrics[1].latency_s < 0);

    /* ranks come back in rank order */
    CHECK(t->ranks_given && t->n_ranks == 2);
    CHECK(t->ranks[0].rank == 0 && t->ranks[0].host == 0 && t->ranks[0].n_devices == 3);
    CHECK(t->ranks[0].devices[0] == 3 && t->ranks[0].devices[1] == 2 &&
          t->ranks[0].devices[2] == 4);
    CHECK(t->ranks[1].rank == 1 && t->ranks[1].host == 1 && t->ranks[1].devices[0] == 9);
    CHECK(t->ranks[1].loc.line == 46 && t->ranks[0].loc.line == 47);

    CHECK(t->n_cases == 2);
    const qm_case *c1 = &t->cases[0];
    CHECK_STR(c1->id, "c1");
    CHECK(c1->request.qubits == 30 && c1->request.dtype == QM_DTYPE_COMPLEX128);
    CHECK(c1->request.policy == QM_POLICY_WEIGHTED && c1->request.batch == 4);
    CHECK(c1->request.features == 1000 && c1->request.encoding == QM_ENCODING_ANGLE);
    CHECK_STR(c1->request.gather, "n0.g1");
    CHECK(c1->request.ranks == 2);
    const qm_case_expect *x = &c1->expect;
    CHECK(x->feasible && !x->has_error && x->has_shards && x->shards == 4);
    CHECK(x->has_pages && x->pages == 8 && x->has_shard_bytes && x->shard_bytes == 4ull << 30);
    CHECK(x->n_devices == 4);
    CHECK_STR(x->devices[3], "n1.g0");
    CHECK(x->n_ranks == 4 && x->ranks[3] == 1 && x->ranks[0] == 0);
    CHECK(x->has_gather && x->gather_feasible);
    CHECK_STR(x->gather_target, "host");
    CHECK(x->has_max_qubits && x->max_qubits_c64 == 33 && x->max_qubits_c128 == 32);
    CHECK(x->has_min_headroom && x->min_headroom_bytes == 0);
    CHECK(x->estimates[QM_PHASE_INGEST].set && x->estimates[QM_PHASE_INGEST].value_s == 15.9e-3);
    CHECK(x->estimates[QM_PHASE_INGEST].rel_tol == 0.05 &&
          x->estimates[QM_PHASE_INGEST].kind == QM_ESTIMATE_MODEL);
    CHECK(x->estimates[QM_PHASE_GATHER].kind == QM_ESTIMATE_REALITY &&
          x->estimates[QM_PHASE_GATHER].value_s == 2.0);
    CHECK(!x->estimates[QM_PHASE_ENCODE].set);
    const qm_case *c2 = &t->cases[1];
    CHECK(c2->request.qubits == 40 && c2->request.dtype == QM_DTYPE_COMPLEX64);
    CHECK(c2->request.policy == QM_POLICY_AUTO && c2->request.batch == 1);
    CHECK(c2->request.features == 0 && c2->request.ranks == 0);
    CHECK_STR(c2->request.gather, "auto");
    CHECK(!c2->expect.feasible && c2->expect.has_error && c2->expect.error == QM_E_CAPACITY);
    CHECK(c2->expect.n_devices == -1 && c2->expect.n_ranks == -1 && !c2->expect.has_shards);
    CHECK(c2->expect.has_gather && !c2->expect.gather_feasible && !c2->expect.gather_target[0]);

    check_roundtrip(t, "sink (dumped)");
    qm_topology_destroy(t);

    /* texts that need escapes survive a dump: tab, newline, NEL, LS, PS, BOM, UTF-8, quotes */
    static const char odd[] = "schema: qmesh/1\nname: 'odd name: yes'\n"
                              "description: \"tab\\there\\nline \\N\\L\\P\\uFEFF caf\xc3\xa9 'q' \\\"\\\\\"\n"
                              "sources: ['  leading and trailing  ', 'true', '0x10', '- a', '#c']\n"
                              "hosts:\n  - id: '@h'\n    devices:\n"
                              "      - {id: 'h:g0', memory: 1 GiB, hbm_bandwidth: 1 TB/s}\n";
    t = load_ok(odd, "odd.yaml");
    if (t) {
        CHECK_STR(t->name, "odd name: yes");
        CHECK_STR(t->description, "tab\there\nline \xc2\x85\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf caf\xc3\xa9 'q' \"\\");
        CHECK(t->n_sources == 5);
        CHECK_STR(t->sources[0], "  leading and trailing  ");
        CHECK_STR(t->nodes[0].id, "h:g0");
        check_roundtrip(t, "odd (dumped)");
    }
    qm_topology_destroy(t);
}

/* ---- the built-in default mesh ------------------------------------------------------------------- */

static void test_default(void)
{
    qm_topology *t = NULL;
    qm_diags d;
    qm_diags_init(&d);
    qm_status st;
    qm_status_clear(&st);
    CHECK(strstr(qm_default_scenario_text(), "schema: qmesh/1") != NULL);
    CHECK(qm_scenario_load_default(&t, &d, &st) == QM_OK);
    CHECK(d.n == 0);
    qm_diags_fini(&d);
    if (!t)
        return;
    CHECK_STR(t->file, "<built-in>");
    CHECK_STR(t->name, "builtin-4xh100-sxm");
    CHECK(t->n_sources == 3);
    CHECK(t->n_hosts == 1 && t->n_gpus == 4 && t->n_nodes == 9);
    CHECK(t->n_links == 11 && t->n_fabrics == 1 && t->n_cases == 0);
    CHECK(!t->ranks_given && t->n_ranks == 1 && t->ranks[0].n_devices == 4);
    for (int g = 0; g < t->n_gpus; ++g) {
        const qm_node *n = &t->nodes[t->gpus[g]];
        CHECK_EQ_U64(n->memory_bytes, 85045477376ull);
        CHECK_EQ_U64(n->reserve_bytes, 512ull << 20);
        CHECK(n->hbm_bw_bytes_per_s == 3.35e12);
        CHECK(t->ranks[0].devices[g] == t->gpus[g]);
    }
    CHECK_STR(t->nodes[t->nodes[t->gpus[3]].numa].id, "n0.numa1");
    CHECK(t->efficiency[QM_LINK_NVLINK] == 0.824 && t->efficiency[QM_LINK_PCIE] == 0.762);
    CHECK(t->fabrics[0].port_bw_bytes_per_s == 450e9 && t->fabrics[0].n_members == 4);
    CHECK(t->links[6].cls == QM_LINK_SYS && t->links[6].bw_ab_bytes_per_s == 22e9);
    check_roundtrip(t, "default (dumped)");
    qm_topology_destroy(t);
    /* a NULL status and NULL diags are allowed */
    t = NULL;
    CHECK(qm_scenario_load_default(&t, NULL, NULL) == QM_OK && t);
    qm_topology_destroy(t);
}

/* ---- located errors ------------------------------------------------------------------------------ */

#define BASE                                                                                       \
    "schema: qmesh/1\n"                                                                            \
    "name: e\n"                                                                                    \
    "hosts:\n"                                                                                     \
    "  - id: n0\n"                                                                                 \
    "    numa: [{id: 0}]\n"                                                                        \
    "    devices:\n"                                                                               \
    "      - {id: n0.g0, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, numa: 0}\n"                     \
    "      - {id: n0.g1, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, numa: 0}\n"                     \
    "links:\n"                                                                                     \
    "  - {a: n0.g0, b: n0.g1, kind: nvlink, bandwidth: 450 GB/s}\n"

static void test_errors(void)
{
    qm_topology *t = load_ok(BASE, "base.yaml");
    CHECK(t && t->n_gpus == 2 && t->n_ranks == 1);
    qm_topology_destroy(t);

    EXPECT_ERR(BASE "  - {a: n0.g0, b: n0.gx, kind: pcie, bandwidth: 1 GB/s}\n", QM_E_UNKNOWN_REF,
               11, 19, "links[1].b: unknown id 'n0.gx'; did you mean 'n0.g0'?");
    /* a NIC may attach to the implicit switch of a fabric inside its host (its host is known
     * once the fabric's members are), and defaults.host_link sets the implicit device links */
    {
        static const char nic[] =
            "schema: qmesh/1\nname: e\ndefaults: {host_link: 63 GB/s}\nhosts:\n  - id: n0\n"
            "    numa: [{id: 0}]\n    devices:\n"
            "      - {id: n0.g0, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, numa: 0}\n"
            "      - {id: n0.g1, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, numa: 0}\n"
            "    nics: [{id: n0.ib, speed: 400 Gb/s, attach: n0.nvl}]\n"
            "fabrics:\n"
            "  - {id: n0.nvl, kind: nvlink, members: [n0.g0, n0.g1], port_bandwidth: 450 GB/s}\n";
        qm_topology *tn = load_ok(nic, "nic.yaml");
        CHECK(tn && tn->n_fabrics == 1 && tn->host_link_bw_bytes_per_s == 63e9);
        if (tn) {
            const int sw = tn->fabrics[0].switch_node;
            int ib = 0;
            while (ib + 1 < tn->n_nodes && strcmp(tn->nodes[ib].id, "n0.ib") != 0)
                ++ib;
            CHECK_STR(tn->nodes[ib].id, "n0.ib");
            CHECK(tn->nodes[sw].host == 0 && tn->nodes[ib].attach == sw);
            check_roundtrip(tn, "nic.yaml (dumped)");
            qm_topology_destroy(tn);
        }
    }
    EXPECT_ERR(BASE "defaults: {host_link: 0 GB/s}\n", QM_E_RANGE, 11, 23, "defaults.host_link");
    /* a fabric naming another fabric as its switch, before that fabric's own switch is resolved
     * (a fuzz finding: the message once read the switch of a fabric that had none yet) */
    EXPECT_ERR(BASE "fabrics:\n"
                    "  - {id: f1, kind: nvlink, switch: f2, members: [n0.g0], port_bandwidth: 1 GB/s}\n"
                    "  - {id: f2, kind: nvlink, switch: f1, members: [n0.g1], port_bandwidth: 1 GB/s}\n",
               QM_E_UNKNOWN_REF, 12, 36,
               "fabrics[0].switch: 'f2' is a fabric, not a switch (pcie_switch or nvswitch)");
    /* a fabric with a declared, resolved switch is named by that switch */
    EXPECT_ERR("schema: qmesh/1\nname: e\nhosts:\n  - id: n0\n    numa: [{id: 0}]\n"
               "    devices:\n"
               "      - {id: n0.g0, memory: 80 GiB, hbm_bandwidth: 3.35 TB/s, numa: 0}\n"
               "    switches:\n      - {id: n0.sw, kind: nvswitch}\n"
               "fabrics:\n"
               "  - {id: f, kind: nvlink, switch: n0.sw, members: [n0.g0], port_bandwidth: 1 GB/s}\n"
               "links:\n  - {a: n0.g0, b: f, kind: nvlink, bandwidth: 1 GB/s}\n",
               QM_E_UNKNOWN_REF, 13, 19,
               "links[0].b: 'f' is a fabric with the switch 'n0.sw', not a node (NUMA node, device, "
               "switch, NIC or fabric); name the switch instead");
    EXPECT_ERR(BASE "  - {a: n0.g1, b: n0.g1, kind: pcie, bandwidth: 1 GB/s}\n", QM_E_SELF_LINK,
               11, 19, "links[1].b: a link from 'n0.g1' to itself");
    EXPECT_ERR(BASE "  - {a: n0.g1, b: n0.g0, kind: pcie, bandwidth: 1 Gbit/s}\n", QM_E_UNIT, 11,
               49, "links[1].bandwidth: '1 Gbit/s' has an unknown unit 'Gbit/s'");
    EXPECT_ERR(BASE "  - {a: n0.g1, b: n0.g0, kind: pcie, bandwidth: 1 GB/s, latency: {x: 1}}\n",
               QM_E_TYPE, 11, 66, "links[1].latency: expected a time such as '1 us', got a mapping");
    EXPECT_ERR(BASE "name: twice\n", QM_E_DUP_KEY, 11, 1,
               "scenario: duplicate key 'name' in the top level (first at line 2, column 1)");
    EXPECT_ERR(BASE "cases:\n  - id: c\n    request: {qubits: 3, dtpye: complex64}\n"
                    "    expect: {feasible: true}\n",
               QM_E_UNKNOWN_KEY, 13, 26,
               "cases[0].request: unknown key 'dtpye' in a request; did you mean 'dtype'?");
    EXPECT_ERR(BASE "cases:\n  - id: c\n    request: {qubit: 3}\n    expect: {feasible: true}\n",
               QM_E_MISSING_FIELD, 13, 14,
               "cases[0].request: a request is missing the required key 'qubits'");
    EXPECT_ERR(BASE "cases:\n  - id: c\n    request: {qubits: 3, policy: equall}\n"
                    "    expect: {feasible: true}\n",
               QM_E_ENUM, 13, 34,
               "cases[0].request.policy: 'equall' is not a valid policy; did you mean 'equal'? "
               "(one of auto, single, equal, weighted, balanced, replicated)");
    EXPECT_ERR(BASE "cases:\n  - id: c\n    request: {qubits: 3, ranks: 2}\n"
                    "    expect: {feasible: true}\n",
               QM_E_RANK, 13, 33, "cases[0].request.ranks: the case uses 2 ranks but the scenario has 1");
    EXPECT_ERR(BASE "cases:\n  - id: n0.g1\n    request: {qubits: 3}\n    expect: {feasible: true}\n",
               QM_E_DUP_ID, 12, 9, "id 'n0.g1' is already used by a device at line 8, column 14");
    EXPECT_ERR("schema: qmesh/1\nname: e\nhosts:\n  - id: n0\n    devices:\n"
               "      - {id: n0.g0, memory: 80 GiB, hbm_bandwidth: 1 TB/s, reserve: 81 GiB}\n",
               QM_E_RESERVE, 6, 69,
               "hosts[0].devices[0].reserve: reserve 81.00 GiB (86973087744 B) is not below the "
               "device memory 80.00 GiB (85899345920 B)");
    EXPECT_ERR("schema: 'qmesh/1.1'\n", QM_E_SCHEMA_VERSION, 1, 9,
               "schema: 'qmesh/1.1' is not supported; this qmesh reads 'qmesh/1'");
    EXPECT_ERR("schema: qmesh/1\nname: e\nhosts: {id: n0}\n", QM_E_TYPE, 3, 8,
               "hosts: expected a list of hosts, got a mapping");
    EXPECT_ERR("\"just a string\"\n", QM_E_TYPE, 1, 1,
               "scenario: the top level must be a mapping starting with 'schema: qmesh/1', got a "
               "scalar");
    EXPECT_ERR("schema: qmesh/1\nname: [a\n", QM_E_YAML_SYNTAX, 3, 1,
               "YAML: did not find expected ',' or ']' at line 3, column 1; while parsing a flow "
               "sequence at line 2, column 7");
    EXPECT_ERR("schema: qmesh/1\nname: e\nhosts: *nowhere\n", QM_E_YAML_SYNTAX, 3, 8,
               "YAML: found undefined alias");

    /* every error of a file is collected, in file order; st holds the first */
    static const char many[] =
        "schema: qmesh/1\n"
        "name: e\n"
        "hosts:\n"
        "  - id: n0\n"
        "    devices:\n"
        "      - {id: n0.g0, memory: 80 GB/s, hbm_bandwidth: 1 TB/s}\n"
        "      - {id: n0.g1, memory: 80 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
        "links:\n"
        "  - {a: n0.g0, b: n0.g9, kind: nvlink, bandwidth: 450 GB/s}\n"
        "fabrics:\n"
        "  - {id: f, kind: nvlink, members: [n0.g0], port_bandwidth: 4 GB/s, colour: red}\n";
    qm_diags d;
    qm_diags_init(&d);
    qm_status st;
    qm_status_clear(&st);
    t = NULL;
    CHECK(qm_scenario_load_string(many, strlen(many), "many.yaml", &t, &d, &st) == QM_E_UNIT);
    CHECK(t == NULL && d.n == 4);
    if (d.n == 4) {
        CHECK(d.items[0].code == QM_E_UNIT && d.items[0].line == 6 && d.items[0].col == 29);
        CHECK(d.items[1].code == QM_E_NUMA && d.items[1].line == 7 && d.items[1].col == 66);
        CHECK(d.items[2].code == QM_E_UNKNOWN_REF && d.items[2].line == 9);
        CHECK(d.items[3].code == QM_E_UNKNOWN_KEY && d.items[3].line == 11 && d.items[3].col == 69);
    }
    CHECK(st.line == 6 && st.col == 29);
    CHECK_STR(st.file, "many.yaml");
    FILE *f = tmpfile();
    if (f) {
        qm_diags_print(&d, f);
        size_t len = 0;
        char *out = read_all(f, &len);
        static const char head[] =
            "many.yaml:6:29: error[E-UNIT]: hosts[0].devices[0].memory: '80 GB/s' is a bandwidth, "
            "but a size is expected here; use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB\n"
            "many.yaml:7:66: error[E-NUMA]: ";
        CHECK(out && strncmp(out, head, sizeof head - 1) == 0);
        CHECK(out && strstr(out, "\nmany.yaml:11:69: error[E-UNKNOWN-KEY]: fabrics[0]: unknown "
                                 "key 'colour' in a fabric; allowed keys: id, kind, switch, "
                                 "members, port_bandwidth, latency\n"));
        free(out);
        fclose(f);
    }
    /* a second load appends to the same diags */
    CHECK(qm_scenario_load_string("x: 1\n", 5, "two.yaml", &t, &d, &st) == QM_E_MISSING_FIELD);
    CHECK(d.n == 5 && strcmp(d.items[4].file, "two.yaml") == 0);
    qm_diags_fini(&d);
    CHECK(d.n == 0 && d.items == NULL);
    qm_diags_fini(NULL);

    /* the cap: 50 errors, then one "too many errors" entry */
    text b = {0};
    put(&b, "schema: qmesh/1\nname: e\nhosts:\n  - id: n0\n    devices:\n");
    for (int i = 0; i < 80; ++i)
        put(&b, "      - {id: g%d, memory: 1 GiB, hbm_bandwidth: %d}\n", i, i + 1);
    qm_diags_init(&d);
    CHECK(qm_scenario_load_string(b.s, b.n, "cap.yaml", &t, &d, NULL) == QM_E_UNIT);
    CHECK(d.n == QM_DIAGS_PER_LOAD + 1);
    if (d.n == QM_DIAGS_PER_LOAD + 1) {
        CHECK(d.items[0].line == 6 && d.items[49].line == 55);
        CHECK_STR(d.items[50].msg, "too many errors: stopping after 50 (fix the ones above first)");
    }
    qm_diags_fini(&d);
    free(b.s);
}

/* ---- edge inputs --------------------------------------------------------------------------------- */

static void test_edges(void)
{
    qm_topology *t = NULL;
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_scenario_load_string(NULL, 0, "none.yaml", &t, NULL, &st) == QM_E_MISSING_FIELD);
    CHECK_ERR(st, QM_E_MISSING_FIELD, "scenario: the file is empty");
    CHECK(st.line == 1 && st.col == 1);
    EXPECT_ERR("# nothing but a comment\n\n", QM_E_MISSING_FIELD, 1, 1, "the file is empty");
    static const char nul[] = "schema: qmesh/1\nname: a\0b\n";
    CHECK(qm_scenario_load_string(nul, sizeof nul - 1, "nul.yaml", &t, NULL, &st) ==
          QM_E_YAML_SYNTAX);
    CHECK_ERR(st, QM_E_YAML_SYNTAX, "YAML: control characters are not allowed (byte 0x00 at offset 23)");
    CHECK(st.line == 2 && st.col == 8 && t == NULL);
    static const char bin[] = "\x7f" "ELF\x02\x01\x01\x00\x00\x00\x00";
    CHECK(qm_scenario_load_string(bin, sizeof bin - 1, "a.out", &t, NULL, &st) == QM_E_YAML_SYNTAX);
    CHECK(qm_scenario_load_string("a", 1, "x", NULL, NULL, &st) == QM_E_ARG);

    /* files: missing, a directory, too large */
    CHECK(qm_scenario_load_file("/nonexistent/dir/s.yaml", &t, NULL, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "scenario: cannot open '/nonexistent/dir/s.yaml': No such file or directory");
    CHECK(t == NULL);
    qm_diags d;
    qm_diags_init(&d);
    CHECK(qm_scenario_load_file(".", &t, &d, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "scenario: '.' is not a regular file (it is a directory)");
    CHECK(d.n == 1 && d.items[0].line == 0);
    FILE *f = tmpfile();
    if (f) {
        qm_diags_print(&d, f);
        size_t len = 0;
        char *out = read_all(f, &len);
        CHECK(out && strcmp(out, ".: error[E-IO]: scenario: '.' is not a regular file (it is a directory)\n") == 0);
        free(out);
        fclose(f);
    }
    qm_diags_fini(&d);
    char path[64];
    snprintf(path, sizeof path, "qm_big_%ld.yaml", (long)time(NULL));
    f = fopen(path, "wb");
    if (f) {
        fputs("schema: qmesh/1\n", f);
        fseek(f, (long)QM_SCENARIO_MAX_BYTES, SEEK_SET); /* sparse: one byte past the limit */
        fputc('\n', f);
        fclose(f);
        CHECK(qm_scenario_load_file(path, &t, NULL, &st) == QM_E_IO);
        CHECK(strstr(st.msg, "is too large (more than 67108864 bytes; the limit is 64 MiB)") != NULL);
        remove(path);
    }
    qm_topology_destroy(NULL);
}

/* ---- a large generated scenario ------------------------------------------------------------------ */

/* hosts x 8 H100 in the DGX H100 layout: 2 NUMA nodes, a PCIe switch per GPU+NIC pair, an
 * NVSwitch fabric per host and one InfiniBand fabric over every NIC. */
static void gen_cluster(text *b, int hosts)
{
    put(b, "schema: qmesh/1\nname: big-%dx8\nsources: [generated by test_scenario_load]\n"
           "defaults: {reserve: 1 GiB, efficiency: {nvlink: 0.824, pcie: 0.762}}\n"
           "device_types:\n  - {name: h100, memory: 81559 MiB, hbm_bandwidth: 3.35 TB/s}\n"
           "hosts:\n",
        hosts);
    for (int h = 0; h < hosts; ++h) {
        put(b, "  - id: n%d\n    memory: 2 TiB\n    numa: [{id: 0}, {id: 1}]\n    devices:\n", h);
        for (int g = 0; g < 8; ++g)
            put(b, "      - {id: n%d.g%d, type: h100, numa: %d}\n", h, g, g / 4);
        put(b, "    switches:\n      - {id: n%d.nvs, kind: nvswitch}\n", h);
        for (int g = 0; g < 8; ++g)
            put(b, "      - {id: n%d.sw%d, kind: pcie_switch, numa: %d}\n", h, g, g / 4);
        put(b, "    nics:\n");
        for (int g = 0; g < 8; ++g)
            put(b, "      - {id: n%d.ib%d, speed: 400 Gb/s, numa: %d, attach: n%d.sw%d}\n", h, g,
                g / 4, h, g);
    }
    put(b, "links:\n");
    for (int h = 0; h < hosts; ++h) {
        put(b, "  - {a: n%d.numa0, b: n%d.numa1, kind: sys, bandwidth: 22 GB/s}\n", h, h);
        for (int g = 0; g < 8; ++g) {
            put(b, "  - {a: n%d.numa%d, b: n%d.sw%d, kind: pcie, bandwidth: 63 GB/s}\n", h, g / 4,
                h, g);
            put(b, "  - {a: n%d.sw%d, b: n%d.g%d, kind: pcie, bandwidth: 63 GB/s}\n", h, g, h, g);
        }
    }
    put(b, "fabrics:\n");
    for (int h = 0; h < hosts; ++h) {
        put(b, "  - {id: n%d.nvl, kind: nvlink, switch: n%d.nvs, port_bandwidth: 450 GB/s, "
               "members: [", h, h);
        for (int g = 0; g < 8; ++g)
            put(b, "%sn%d.g%d", g ? ", " : "", h, g);
        put(b, "]}\n");
    }
    put(b, "  - id: ib\n    kind: net\n    port_bandwidth: 400 Gb/s\n    latency: 2.7 us\n"
           "    members:\n");
    for (int h = 0; h < hosts; ++h)
        for (int g = 0; g < 8; ++g)
            put(b, "      - n%d.ib%d\n", h, g);
}

static void test_big(void)
{
#if defined(__SANITIZE_ADDRESS__)
    const int hosts = 128; /* sanitizers are ~10x slower: check correctness, not speed */
#else
    const int hosts = 1024;
#endif
    text b = {0};
    gen_cluster(&b, hosts);
    CHECK(b.s != NULL);
    if (!b.s)
        return;
    qm_topology *t = NULL;
    qm_status st;
    qm_status_clear(&st);
    double t0 = now_s();
    clock_t c0 = clock();
    qm_code rc = qm_scenario_load_string(b.s, b.n, "big.yaml", &t, NULL, &st);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC; /* not inflated by parallel tests */
    double dt = now_s() - t0;
    CHECK(rc == QM_OK);
    if (rc != QM_OK)
        fprintf(stderr, "big: %s:%d:%d %s\n", st.file, st.line, st.col, st.msg);
    printf("test_scenario_load: %d hosts x 8 GPUs (%zu bytes) loaded in %.3f s (%.3f s CPU)\n",
           hosts, b.n, dt, cpu);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(cpu < 1.0);
#endif
    if (t) {
        CHECK(t->n_hosts == hosts && t->n_gpus == 8 * hosts && t->n_ranks == hosts);
        CHECK(t->n_nodes == hosts * 27 + 1);              /* + the implicit IB switch */
        CHECK(t->n_links == hosts * (17 + 8) + 8 * hosts); /* explicit, NVSwitch, IB */
        CHECK(t->fabrics[hosts].n_members == 8 * hosts);
        CHECK(t->links[t->n_links - 1].bw_ab_bytes_per_s == 50e9);
        CHECK(t->links[t->n_links - 1].latency_s == 2.7e-6);
        CHECK(t->ranks[hosts - 1].n_devices == 8 && t->ranks[hosts - 1].host == hosts - 1);
    }
    qm_topology_destroy(t);
    free(b.s);

    /* round trip of a smaller cluster */
    text s = {0};
    gen_cluster(&s, 4);
    t = load_ok(s.s, "small-cluster.yaml");
    if (t)
        check_roundtrip(t, "small cluster (dumped)");
    qm_topology_destroy(t);
    free(s.s);
}

/* ---- aliases: allowed, but bounded --------------------------------------------------------------- */

static void test_aliases(void)
{
    static const char yaml[] = "schema: qmesh/1\nname: a\n"
                               "hosts:\n"
                               "  - id: n0\n"
                               "    devices:\n"
                               "      - {id: n0.g0, memory: &m 80 GiB, hbm_bandwidth: &b 2 TB/s}\n"
                               "      - {id: n0.g1, memory: *m, hbm_bandwidth: *b}\n"
                               "links:\n"
                               "  - {a: n0.g0, b: n0.g1, kind: nvlink, bandwidth: 1 GB/s}\n";
    qm_topology *t = load_ok(yaml, "alias.yaml");
    CHECK(t && t->nodes[1].memory_bytes == 80ull << 30 && t->nodes[1].hbm_bw_bytes_per_s == 2e12);
    qm_topology_destroy(t);
    EXPECT_ERR("schema: qmesh/1\nname: a\nhosts: &h [*h]\n", QM_E_YAML_SYNTAX, 3, 12,
               "YAML: alias '*h' refers to a node that contains it (a recursive structure)");
    text b = {0};
    put(&b, "schema: qmesh/1\nname: bomb\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n");
    for (int i = 1; i <= 7; ++i) {
        put(&b, "x%d: &x%d [", i, i);
        for (int k = 0; k < 10; ++k)
            put(&b, "%s*x%d", k ? ", " : "", i - 1);
        put(&b, "]\n");
    }
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_scenario_load_string(b.s, b.n, "bomb.yaml", &t, NULL, &st) == QM_E_RANGE);
    CHECK(strstr(st.msg, "more than 2000000 nodes, counting every alias expansion") != NULL);
    CHECK(st.line == 9);
    free(b.s);
}

/* ---- never crash: deterministic mutations of a valid scenario ------------------------------------ */

static void test_mutations(void)
{
    size_t n = strlen(sink_yaml);
    char *buf = malloc(n + 64);
    if (!buf)
        return;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int loaded = 0, consistent = 0;
    const int iters = 1500;
    for (int it = 0; it < iters; ++it) {
        memcpy(buf, sink_yaml, n);
        size_t m = n;
        for (int k = 0; k < 1 + it % 3; ++k) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t pos = (size_t)(x % m);
            switch ((x >> 40) % 4) {
            case 0: m = pos ? pos : 1; break;                                    /* truncate */
            case 1: buf[pos] = (char)(x >> 24); break;                           /* any byte */
            case 2: buf[pos] = " :-{}[],&*<#'\"\n\t!|"[(x >> 30) % 19]; break; /* syntax */
            default: buf[pos] = (char)('0' + (x >> 33) % 10); break;             /* a digit */
            }
        }
        qm_topology *t = NULL;
        qm_diags d;
        qm_diags_init(&d);
        qm_status st;
        qm_status_clear(&st);
        qm_code rc = qm_scenario_load_string(buf, m, "mut.yaml", &t, &d, &st);
        bool ok = (rc == QM_OK) == (t != NULL);
        if (rc != QM_OK)
            ok = ok && d.n >= 1 && st.code == rc && st.msg[0] && d.items[0].code == rc;
        if (t) {
            ++loaded;
            FILE *f = tmpfile();
            size_t len = 0;
            char *text1 = NULL;
            qm_topology *u = NULL;
            ok = ok && f && qm_scenario_dump(t, f, &st) == QM_OK && (text1 = read_all(f, &len)) &&
                 qm_scenario_load_string(text1, len, "mut-dump.yaml", &u, NULL, &st) == QM_OK &&
                 topo_equal(t, u);
            free(text1);
            qm_topology_destroy(u);
            if (f)
                fclose(f);
        }
        consistent += ok;
        qm_topology_destroy(t);
        qm_diags_fini(&d);
    }
    CHECK(consistent == iters);
    CHECK(loaded > 0 && loaded < iters);
    printf("test_scenario_load: %d mutations, %d still load, all consistent: %s\n", iters, loaded,
           consistent == iters ? "yes" : "no");
    free(buf);
}

/* ---- the CLI ------------------------------------------------------------------------------------- */

static int run_cli(int argc, char **argv, char **out, char **err)
{
    FILE *o = tmpfile(), *e = tmpfile();
    int rc = o && e ? qm_cli_topo_validate_to(argc, argv, o, e) : -1;
    size_t len;
    *out = o ? read_all(o, &len) : NULL;
    *err = e ? read_all(e, &len) : NULL;
    if (o)
        fclose(o);
    if (e)
        fclose(e);
    return rc;
}

static void test_cli(void)
{
    char good[64], bad[64];
    snprintf(good, sizeof good, "qm_cli_good_%ld.yaml", (long)time(NULL));
    snprintf(bad, sizeof bad, "qm_cli_bad_%ld.yaml", (long)time(NULL));
    FILE *f = fopen(good, "wb");
    if (f) {
        fputs(qm_default_scenario_text(), f);
        fclose(f);
    }
    f = fopen(bad, "wb");
    if (f) {
        fputs(BASE "  - {a: n0.g0, b: n0.g9, kind: pcie, bandwidth: 1 GB/s}\n"
                   "  - {a: n0.g0, b: n0.g1, kind: pcie, bandwidth: 1}\n", f);
        fclose(f);
    }
    char *out = NULL, *err = NULL;
    char *a1[] = {"validate", good, NULL};
    CHECK(run_cli(2, a1, &out, &err) == 0);
    char want[256];
    snprintf(want, sizeof want, "%s: ok (1 hosts, 4 devices, 11 links, 0 cases)\n", good);
    CHECK(out && strcmp(out, want) == 0);
    CHECK(err && err[0] == '\0');
    free(out);
    free(err);

    char *a2[] = {"validate", good, bad, NULL};
    CHECK(run_cli(3, a2, &out, &err) == 1);
    CHECK(out && strcmp(out, want) == 0);
    char want_err[512];
    snprintf(want_err, sizeof want_err,
             "%s:11:19: error[E-UNKNOWN-REF]: links[1].b: unknown id 'n0.g9'; did you mean "
             "'n0.g0'?\n%s:12:49: error[E-UNIT]: links[2].bandwidth: '1' has no unit",
             bad, bad);
    CHECK(err && strncmp(err, want_err, strlen(want_err)) == 0);
    free(out);
    free(err);

    char *a3[] = {"validate", NULL};
    CHECK(run_cli(1, a3, &out, &err) == 2);
    CHECK(err && strstr(err, "qmesh topo validate: no scenario file given\nusage: qmesh topo validate FILE...") == err);
    free(out);
    free(err);
    char *a4[] = {"validate", "--strict", good, NULL};
    CHECK(run_cli(3, a4, &out, &err) == 2);
    CHECK(err && strstr(err, "unknown option '--strict'"));
    free(out);
    free(err);
    char *a5[] = {"validate", "--help", NULL};
    CHECK(run_cli(2, a5, &out, &err) == 0);
    CHECK(out && strstr(out, "usage: qmesh topo validate FILE..."));
    free(out);
    free(err);
    char *a6[] = {"validate", "--", "/nonexistent.yaml", NULL};
    CHECK(run_cli(3, a6, &out, &err) == 1);
    CHECK(err && strcmp(err, "/nonexistent.yaml: error[E-IO]: scenario: cannot open "
                             "'/nonexistent.yaml': No such file or directory\n") == 0);
    free(out);
    free(err);
    remove(good);
    remove(bad);
}

/* ---- the small helpers of scenario.h -------------------------------------------------------------- */

static void test_helpers(void)
{
    qm_request r;
    memset(&r, 0x5a, sizeof r);
    qm_request_init(&r);
    CHECK(r.qubits == 0 && r.dtype == QM_DTYPE_COMPLEX64 && r.policy == QM_POLICY_AUTO);
    CHECK(r.batch == 1 && r.features == 0 && r.encoding == QM_ENCODING_AMPLITUDE && r.ranks == 0);
    CHECK_STR(r.gather, "auto");
    CHECK_STR(qm_link_class_name(QM_LINK_C2C), "c2c");
    CHECK_STR(qm_link_class_name(QM_LINK_NET), "net");
    CHECK(qm_link_class_name(QM_LINK_CLASS_COUNT_) == NULL);
    CHECK_STR(qm_phase_name(QM_PHASE_NORM_ALLREDUCE), "norm_allreduce");
    CHECK(qm_phase_name(QM_PHASE_COUNT_) == NULL);
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_scenario_dump(NULL, stdout, &st) == QM_E_ARG);
}

/* ---- the scenario library ------------------------------------------------------------------------- */

#if defined(__unix__)
#include <dirent.h>
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .yaml file of dir loads, cites its sources, and survives a dump round trip. */
static void test_library(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d)
        return;
    char *names[512];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 512;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0) {
            names[n] = malloc(strlen(dir) + len + 2);
            if (names[n])
                sprintf(names[n++], "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    CHECK(n > 0);
    for (int i = 0; i < n; ++i) {
        qm_topology *t = NULL;
        qm_diags dg;
        qm_diags_init(&dg);
        qm_status st;
        qm_status_clear(&st);
        if (qm_scenario_load_file(names[i], &t, &dg, &st) != QM_OK) {
            qm_test_fail(__FILE__, __LINE__, "%s does not load", names[i]);
            qm_diags_print(&dg, stderr);
        } else {
            qm_test_checks++;
            if (t->n_sources < 1)
                qm_test_fail(__FILE__, __LINE__, "%s: scenarios/ files must cite sources",
                             names[i]);
            check_roundtrip(t, names[i]);
            printf("library: %s: ok (%d hosts, %d devices, %d links, %d cases)\n", names[i],
                   t->n_hosts, t->n_gpus, t->n_links, t->n_cases);
        }
        qm_diags_fini(&dg);
        qm_topology_destroy(t);
        free(names[i]);
    }
}
#endif

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dir") == 0) {
#if defined(__unix__)
        test_library(argv[2]);
#endif
        return qm_test_end("test_scenario_load --dir");
    }
    test_helpers();
    test_sink();
    test_default();
    test_errors();
    test_edges();
    test_aliases();
    test_cli();
    test_mutations();
    test_big();
    return qm_test_end("test_scenario_load");
}
