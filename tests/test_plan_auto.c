/* test_plan_auto.c — auto over any mesh, hints that work, and the frontier of `plan --max`.
 *
 * Meshes (scenario text, reserve 1 GiB: a "40 GiB" device has 39 GiB usable, an "80 GiB" 79):
 *   A  3 hosts x 4 x 40 GiB, one rank per host (3 ranks, 12 devices)
 *   B  one host, 3 ranks of 1, 2 and 3 devices: 80 | 40 40 | 40 40 40 (6 devices, mixed)
 *   C  one host, 6 x 40 GiB, one rank
 *   D  one host, 2 ranks of 1 and 3 devices: 80 | 80 40 40 (mixed, unequal ranks)
 *   E  one host, 80 80 40 40, one rank (power of two, mixed)
 * For a table of infeasible requests the hint is parsed out of the message, applied (another
 * policy, fewer qubits, a smaller batch, --gather none) and the re-plan must be feasible; over a
 * grid of requests auto must be feasible wherever any explicit policy is; and the frontier values
 * are checked against numbers derived by hand from the capacities.
 */
#include "plan_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hosts[h] = a string of device sizes in GiB ("40 40 40 40"); ranks: a `ranks:` block or NULL */
static char *mesh_yaml(int n_hosts, const char *const *hosts, const char *ranks)
{
    size_t cap = 16384, k = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    k += (size_t)snprintf(b + k, cap - k, "schema: qmesh/1\nname: m\nsources: [test]\n"
                                          "defaults: {reserve: 1 GiB}\nhosts:\n");
    char links[8192];
    size_t lk = 0;
    for (int h = 0; h < n_hosts; ++h) {
        k += (size_t)snprintf(b + k, cap - k, "  - id: n%d\n    memory: 2 TiB\n    numa: [{id: 0}]\n"
                                              "    devices:\n", h);
        const char *s = hosts[h];
        for (int g = 0; *s; ++g) {
            char *end;
            long gib = strtol(s, &end, 10);
            s = end;
            while (*s == ' ')
                ++s;
            k += (size_t)snprintf(b + k, cap - k, "      - {id: n%d.g%d, memory: %ld GiB, "
                                                  "hbm_bandwidth: 2 TB/s, numa: 0}\n", h, g, gib);
            lk += (size_t)snprintf(links + lk, sizeof links - lk,
                                   "  - {a: n%d.numa0, b: n%d.g%d, kind: pcie, bandwidth: 24 GB/s}\n",
                                   h, h, g);
        }
        if (n_hosts > 1)
            k += (size_t)snprintf(b + k, cap - k, "    nics: [{id: n%d.nic, speed: 200 Gb/s, numa: 0, "
                                                  "attach: n%d.numa0}]\n", h, h);
    }
    k += (size_t)snprintf(b + k, cap - k, "links:\n%s", links);
    if (n_hosts > 1) {
        k += (size_t)snprintf(b + k, cap - k, "fabrics:\n  - {id: ib, kind: net, members: [");
        for (int h = 0; h < n_hosts; ++h)
            k += (size_t)snprintf(b + k, cap - k, "%sn%d.nic", h ? ", " : "", h);
        k += (size_t)snprintf(b + k, cap - k, "], port_bandwidth: 25 GB/s}\n");
    }
    if (ranks)
        k += (size_t)snprintf(b + k, cap - k, "%s", ranks);
    return b;
}

enum { MESH_A, MESH_B, MESH_C, MESH_D, MESH_E, N_MESHES };

static bool load_mesh(fixture *f, int which)
{
    static const char *const a[] = {"40 40 40 40", "40 40 40 40", "40 40 40 40"};
    static const char *const b[] = {"80 40 40 40 40 40"};
    static const char *const c[] = {"40 40 40 40 40 40"};
    static const char *const d[] = {"80 80 40 40"};
    static const char *const *hosts[] = {a, b, c, d, d};
    static const int n_hosts[] = {3, 1, 1, 1, 1};
    static const char *const ranks[] = {
        NULL,
        "ranks:\n  - {rank: 0, host: n0, devices: [n0.g0]}\n"
        "  - {rank: 1, host: n0, devices: [n0.g1, n0.g2]}\n"
        "  - {rank: 2, host: n0, devices: [n0.g3, n0.g4, n0.g5]}\n",
        NULL,
        "ranks:\n  - {rank: 0, host: n0, devices: [n0.g0]}\n"
        "  - {rank: 1, host: n0, devices: [n0.g1, n0.g2, n0.g3]}\n",
        NULL,
    };
    char *y = mesh_yaml(n_hosts[which], hosts[which], ranks[which]);
    bool ok = y && fixture_load(f, y, 0);
    free(y);
    return ok;
}

static qm_plan *plan_req(fixture *f, const qm_request *r, qm_status *st)
{
    (void)qm_pipeline_plan(&f->pl, r, st);
    qm_plan *p = f->pl.plan;
    f->pl.plan = NULL;
    return p;
}

static qm_request req(unsigned q, qm_dtype dt, qm_policy pol, uint64_t batch, uint64_t features)
{
    qm_request r;
    qm_request_init(&r);
    r.qubits = q;
    r.dtype = dt;
    r.policy = pol;
    r.batch = batch;
    r.features = features;
    return r;
}

/* Apply the hint of msg to r; false when there is no hint this test knows. */
static bool apply_hint(const char *msg, qm_request *r)
{
    const char *h = strrchr(msg, ';');
    char name[32], dt[32];
    unsigned n;
    unsigned long long b, feat;
    if (!h)
        return false;
    h += 2;
    if (sscanf(h, "use --policy %31s", name) == 1) {
        for (int i = 0; i < QM_POLICY_COUNT_; ++i)
            if (strcmp(qm_policy_name((qm_policy)i), name) == 0) {
                r->policy = (qm_policy)i;
                return true;
            }
        return false;
    }
    if (strcmp(h, "use --gather none") == 0) {
        snprintf(r->gather, sizeof r->gather, "none");
        return true;
    }
    if (sscanf(h, "largest state that fits is %u qubits (%31[a-z0-9])", &n, dt) == 2) {
        r->qubits = n;
        r->dtype = strcmp(dt, "complex128") == 0 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
        if (strstr(h, " with --policy auto"))
            r->policy = QM_POLICY_AUTO;
        return strcmp(dt, qm_dtype_name(r->dtype)) == 0;
    }
    if (sscanf(h, "largest batch that fits is %llu (%llu features, %31[a-z0-9]", &b, &feat, dt) == 3) {
        if (feat != r->features || strcmp(dt, qm_dtype_name(r->dtype)) != 0)
            return false;
        r->batch = b;
        if (strstr(h, " with --policy auto"))
            r->policy = QM_POLICY_AUTO;
        return true;
    }
    return false;
}

/* Every infeasible request's hint, applied, gives a feasible plan; `want` is the exact hint. */
static void test_hints_apply(void)
{
    static const struct {
        int mesh;
        unsigned q;
        qm_dtype dt;
        qm_policy pol;
        uint64_t batch, features;
        const char *gather, *want;
    } cases[] = {
        /* A: the 2 -> 3 node what-if; equal and single cannot serve 3 ranks, weighted can */
        {MESH_A, 30, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL, "; use --policy weighted"},
        {MESH_A, 30, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, 1, 0, NULL, "; use --policy weighted"},
        /* 2^36 x 8 B = 512 GiB > 12 x 39 GiB = 468 GiB: 35 fits (256 GiB) */
        {MESH_A, 36, QM_DTYPE_COMPLEX64, QM_POLICY_AUTO, 1, 0, NULL,
         "; largest state that fits is 35 qubits (complex64)"},
        {MESH_A, 36, QM_DTYPE_COMPLEX128, QM_POLICY_WEIGHTED, 1, 0, NULL,
         "; largest state that fits is 34 qubits (complex128)"},
        {MESH_A, 40, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, 1, 0, NULL,
         "; largest state that fits is 35 qubits (complex64) with --policy auto"},
        /* replicated: 2^33 x 8 B = 64 GiB > 39 GiB; 32 qubits = 32 GiB + 64 MiB staging fit */
        {MESH_A, 33, QM_DTYPE_COMPLEX64, QM_POLICY_REPLICATED, 1, 0, NULL,
         "; largest state that fits is 32 qubits (complex64)"},
        /* 12 devices, 8 amplitudes: only replicated serves it */
        {MESH_A, 3, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, 1, 0, NULL, "; use --policy replicated"},
        /* batch of 1e6-feature samples (20 qubits, 8 MiB each): per device (39 GiB - 64 MiB
         * staging) / 8 MiB = 4984 samples, x 12 = 59808 */
        {MESH_A, 20, QM_DTYPE_COMPLEX64, QM_POLICY_AUTO, 100000, 1000000, NULL,
         "; largest batch that fits is 59808 (1000000 features, complex64)"},
        {MESH_A, 20, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, 100, 1000000, NULL,
         "; use --policy equal"},
        /* B: 3 unequal ranks, 80 | 40 40 | 40 40 40 */
        {MESH_B, 30, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL, "; use --policy weighted"},
        /* balanced: 2^35 x 8 B / 6 = 42.67 GiB > 39 GiB; 34 qubits: 21.33 GiB */
        {MESH_B, 35, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, 1, 0, NULL,
         "; largest state that fits is 34 qubits (complex64)"},
        /* 2^36 x 8 = 512 GiB > 79 + 5 x 39 = 274 GiB */
        {MESH_B, 36, QM_DTYPE_COMPLEX64, QM_POLICY_AUTO, 1, 0, NULL,
         "; largest state that fits is 35 qubits (complex64)"},
        /* C: 6 x 40 GiB, one rank: equal needs a power of two */
        {MESH_C, 34, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL, "; use --policy weighted"},
        {MESH_C, 35, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL,
         "; largest state that fits is 34 qubits (complex64) with --policy auto"},
        /* single: 2^33 x 8 B = 64 GiB > 39 GiB */
        {MESH_C, 33, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, 1, 0, NULL,
         "; largest state that fits is 32 qubits (complex64)"},
        /* replicated: a 2^33 x 8 B = 64 GiB sample fits no 39 GiB device, so no batch at all;
         * under auto one such state fits (weighted over 234 GiB), two whole samples do not */
        {MESH_C, 33, QM_DTYPE_COMPLEX64, QM_POLICY_REPLICATED, 2, 1000, NULL,
         "; largest batch that fits is 1 (1000 features, complex64 with --policy auto)"},
        /* a gather target that cannot hold the rest: 2^34 x 8 B = 128 GiB, 106.67 GiB beyond n0.g1's shard */
        {MESH_C, 34, QM_DTYPE_COMPLEX64, QM_POLICY_AUTO, 1, 0, "n0.g1", "; use --gather none"},
        /* D: 2 ranks of 1 and 3 devices */
        {MESH_D, 30, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL, "; use --policy weighted"},
        {MESH_D, 36, QM_DTYPE_COMPLEX128, QM_POLICY_AUTO, 1, 0, NULL,
         "; largest state that fits is 33 qubits (complex128)"},
        /* complex128 batch, 16 MiB samples: (79 GiB - 64 MiB) / 16 MiB = 5052 on an 80 GiB device,
         * 2492 on a 40 GiB one: 5052 x 2 + 2492 x 2 = 15088 */
        {MESH_D, 20, QM_DTYPE_COMPLEX128, QM_POLICY_WEIGHTED, 20000, 1000000, NULL,
         "; largest batch that fits is 15088 (1000000 features, complex128)"},
        /* E: power of two, mixed: equal puts a quarter on each 40 GiB device: 2^35 x 8 / 4 = 64 GiB */
        {MESH_E, 35, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, 1, 0, NULL,
         "; largest state that fits is 34 qubits (complex64)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        fixture f;
        if (!load_mesh(&f, cases[i].mesh)) {
            CHECK(!"mesh loads");
            fixture_free(&f);
            continue;
        }
        qm_request r = req(cases[i].q, cases[i].dt, cases[i].pol, cases[i].batch, cases[i].features);
        if (cases[i].gather)
            snprintf(r.gather, sizeof r.gather, "%s", cases[i].gather);
        qm_status st;
        qm_plan *p = plan_req(&f, &r, &st);
        CHECK(p && !p->feasible);
        if (p && !p->feasible) {
            const char *h = strrchr(p->error.msg, ';');
            if (!h || strcmp(h, cases[i].want) != 0)
                fprintf(stderr, "case %zu: %s\n", i, p->error.msg);
            CHECK(h && strcmp(h, cases[i].want) == 0);
            qm_request r2 = r;
            CHECK(apply_hint(p->error.msg, &r2));
            qm_plan *p2 = plan_req(&f, &r2, &st);
            if (!p2 || !p2->feasible)
                fprintf(stderr, "case %zu: hint applied: %s\n", i, p2 ? p2->error.msg : st.msg);
            CHECK(p2 && p2->feasible);
            qm_plan_destroy(p2);
            /* the largest that fits is the largest: one more does not */
            if (strstr(cases[i].want, "largest") && !strstr(cases[i].want, "with --policy")) {
                if (r2.batch > 1 || r.batch > 1)
                    r2.batch++;
                else
                    r2.qubits++;
                p2 = plan_req(&f, &r2, &st);
                CHECK(p2 && !p2->feasible);
                qm_plan_destroy(p2);
            }
        }
        qm_plan_destroy(p);
        fixture_free(&f);
    }
}

/* Over a grid of requests: auto is feasible wherever an explicit policy is. */
static void test_auto_covers(void)
{
    static const uint64_t batches[] = {1, 2, 3, 1000, 40000};
    int plans = 0;
    for (int m = 0; m < N_MESHES; ++m) {
        fixture f;
        if (!load_mesh(&f, m)) {
            CHECK(!"mesh loads");
            fixture_free(&f);
            continue;
        }
        for (int k = 0; k < 2; ++k)
            for (size_t bi = 0; bi < sizeof batches / sizeof *batches; ++bi)
                for (unsigned q = 1; q <= 37; ++q) {
                    if (batches[bi] > 1 && q > 24)
                        break;
                    const qm_dtype dt = k ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
                    qm_status st;
                    bool any = false;
                    for (int pol = 1; pol < QM_POLICY_COUNT_; ++pol) {
                        /* feasibility only (layout + capacity): what an explicit plan decides */
                        qm_request r = req(q, dt, (qm_policy)pol, batches[bi], 0);
                        qm_plan *p = NULL;
                        any = any || qm_plan_layout(f.m, &r, &p, &st) == QM_OK;
                        qm_plan_destroy(p);
                    }
                    qm_request r = req(q, dt, QM_POLICY_AUTO, batches[bi], 0);
                    qm_plan *p = plan_req(&f, &r, &st);
                    const bool ok = p && p->feasible == any;
                    if (!ok)
                        fprintf(stderr, "mesh %d, %u qubits %s batch %llu: auto %s, explicit %s\n", m,
                                q, qm_dtype_name(dt), (unsigned long long)batches[bi],
                                p && p->feasible ? "fits" : "does not fit", any ? "fits" : "does not");
                    CHECK(ok);
                    qm_plan_destroy(p);
                    plans++;
                }
        fixture_free(&f);
    }
    CHECK(plans > 500);
}

/* auto's pick and the frontier per policy (qm_plan_max_query), derived by hand in the comments. */
static void test_max(void)
{
    enum { AU = QM_POLICY_AUTO, SI = QM_POLICY_SINGLE, EQ = QM_POLICY_EQUAL, WE = QM_POLICY_WEIGHTED,
           BA = QM_POLICY_BALANCED, RE = QM_POLICY_REPLICATED };
    static const struct {
        int mesh;
        uint64_t features;
        uint64_t want[2][QM_POLICY_COUNT_]; /* auto, single, equal, weighted, balanced, replicated */
        qm_policy pick[2];
    } cases[] = {
        /* A, 468 GiB: 2^35 x 8 B = 256 GiB fits, 512 does not; complex128 one less. single: 3
         * ranks; equal: 12 devices; replicated: the state on one 39 GiB device: 2^32 x 8 = 32 GiB */
        {MESH_A, 0, {{35, 0, 0, 35, 35, 32}, {34, 0, 0, 34, 34, 31}}, {QM_POLICY_WEIGHTED, QM_POLICY_WEIGHTED}},
        /* B, 274 GiB: weighted 35 (256 GiB, 73.8 GiB on the 80 GiB device, 36.4 on each 40);
         * balanced 2^35 x 8 / 6 = 42.7 GiB > 39, so 34 */
        {MESH_B, 0, {{35, 0, 0, 35, 34, 32}, {34, 0, 0, 34, 33, 31}}, {QM_POLICY_WEIGHTED, QM_POLICY_WEIGHTED}},
        /* C, 234 GiB: 34 (128 GiB; 256 does not fit); single and replicated 39 GiB: 32 */
        {MESH_C, 0, {{34, 32, 0, 34, 34, 32}, {33, 31, 0, 33, 33, 31}}, {QM_POLICY_WEIGHTED, QM_POLICY_WEIGHTED}},
        /* D, 236 GiB over ranks of 1 and 3 devices: equal cannot (unequal ranks) */
        {MESH_D, 0, {{34, 0, 0, 34, 34, 32}, {33, 0, 0, 33, 33, 31}}, {QM_POLICY_WEIGHTED, QM_POLICY_WEIGHTED}},
        /* E, one rank: equal 2^34 x 8 / 4 = 32 GiB fits each 40 GiB device; single on an 80 GiB
         * device 2^33 x 8 = 64 GiB; at 34 qubits weighted deals P = 4 pages by capacity
         * (79:79:39:39 -> 1,1,1,1), the same layout as equal at the same cost: the tie goes to equal */
        {MESH_E, 0, {{34, 33, 34, 34, 34, 32}, {33, 32, 33, 33, 33, 31}}, {QM_POLICY_EQUAL, QM_POLICY_EQUAL}},
        /* batches of 1e6 features (20 qubits): complex64 8 MiB + 4 MB input per sample, per 40 GiB
         * device (39 GiB - 64 MiB) / 8 MiB = 4984, complex128 / 16 MiB = 2492; A: x 12 devices;
         * replicated: every device holds the whole batch, 4984 / 2492; single: 3 ranks */
        {MESH_A, 1000000, {{59808, 0, 59808, 59808, 59808, 4984}, {29904, 0, 29904, 29904, 29904, 2492}},
         {QM_POLICY_EQUAL, QM_POLICY_EQUAL}},
        /* D: 80 GiB devices (79 GiB - 64 MiB) / 8 MiB = 10104, / 16 MiB = 5052: 2 x 10104 + 2 x
         * 4984 = 30176, 2 x 5052 + 2 x 2492 = 15088 */
        {MESH_D, 1000000, {{30176, 0, 30176, 30176, 30176, 4984}, {15088, 0, 15088, 15088, 15088, 2492}},
         {QM_POLICY_EQUAL, QM_POLICY_EQUAL}},
    };
    (void)AU, (void)SI, (void)EQ, (void)WE, (void)BA, (void)RE;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        fixture f;
        if (!load_mesh(&f, cases[i].mesh)) {
            CHECK(!"mesh loads");
            fixture_free(&f);
            continue;
        }
        qm_request r = req(1, QM_DTYPE_COMPLEX64, QM_POLICY_AUTO, 1, cases[i].features);
        qm_plan_max m;
        qm_status st;
        CHECK_OK(qm_plan_max_query(f.m, &r, &m, &st));
        CHECK(m.batch == (cases[i].features > 0));
        for (int k = 0; k < 2; ++k) {
            for (int pol = 0; pol < QM_POLICY_COUNT_; ++pol) {
                if (m.value[k][pol] != cases[i].want[k][pol])
                    fprintf(stderr, "max case %zu, dtype %d, %s: got %llu want %llu\n", i, k,
                            qm_policy_name((qm_policy)pol), (unsigned long long)m.value[k][pol],
                            (unsigned long long)cases[i].want[k][pol]);
                CHECK_EQ_U64(m.value[k][pol], cases[i].want[k][pol]);
            }
            if (m.auto_pick[k] != cases[i].pick[k])
                fprintf(stderr, "max case %zu, dtype %d: auto picks %s\n", i, k,
                        qm_policy_name(m.auto_pick[k]));
            CHECK(m.auto_pick[k] == cases[i].pick[k]);
        }
        fixture_free(&f);
    }
}

/* The 3-rank weighted layout: pages go to ranks in proportion to their capacity. */
static void test_weighted_ranks(void)
{
    fixture f;
    CHECK(load_mesh(&f, MESH_B));
    qm_request r = req(30, QM_DTYPE_COMPLEX64, QM_POLICY_WEIGHTED, 1, 0);
    qm_status st;
    qm_plan *p = plan_req(&f, &r, &st);
    CHECK(p && p->feasible);
    if (p && p->feasible) {
        /* P = 8 pages (>= 6 devices) by capacity 79 : 78 : 117 -> exact 2.31 : 2.28 : 3.42 ->
         * 2, 2, 3 and the largest remainder (0.42, rank 2) one more: 2, 2, 4; every device gets a
         * page: rank 1: 1 + 1, rank 2: 2 + 1 + 1 (ties by index) */
        CHECK_EQ_U64(p->pages, 8);
        CHECK(p->n_shards == 6);
        static const uint64_t pages[6] = {2, 1, 1, 2, 1, 1};
        uint64_t pos = 0;
        for (int i = 0; i < 6 && i < p->n_shards; ++i) {
            CHECK(p->shards[i].device == i);
            CHECK_EQ_U64(p->shards[i].start, pos);
            pos += pages[i] << 27;
            CHECK_EQ_U64(p->shards[i].end, pos);
        }
        CHECK(p->shards[0].rank == 0 && p->shards[2].rank == 1 && p->shards[5].rank == 2);
    }
    qm_plan_destroy(p);
    fixture_free(&f);
}

int main(void)
{
    test_hints_apply();
    test_auto_covers();
    test_max();
    test_weighted_ranks();
    return qm_test_end("test_plan_auto");
}
