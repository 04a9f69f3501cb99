/* test_conformance_planner.c — the reference system's planner behaviours (Apache Mahout QDP) in
 * our API's terms, on the simulated mesh. Each check names its item: 5 equal over two devices,
 * 6 balanced ranges, 7 single, 8 replicated (implemented), 9 the balanced order on T3 with ids
 * [10, 11, 12], 10 world size and rank checks, 11 one contiguous range per rank, 12 no empty
 * shard, 13 no global 30-qubit cap, 14 balanced over six devices, 15 zero qubits and shard ids out
 * of range. (T3 and items 1 and 4 are described in test_conformance_topology.c.) */
#include "plan_fixtures.h"

static char buf[16384];

static void item5_equal_two_devices(void)
{
    static const char *const ids[2] = {"3", "7"};
    fixture f;
    CHECK(fixture_load(&f, fixture_box(buf, sizeof buf, 2, ids, "16 GiB", false), 0));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 3, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 2);
    if (p && p->n_shards == 2) {
        CHECK(p->shards[0].start == 0 && p->shards[0].end == 4);
        CHECK_STR(f.m->devices[p->shards[0].device].id, "3");
        CHECK(p->shards[1].start == 4 && p->shards[1].end == 8);
        CHECK_STR(f.m->devices[p->shards[1].device].id, "7");
        CHECK_STR(p->gather.target, "3"); /* item 5: gather device 3 */
    }
    qm_plan_destroy(p);
    fixture_free(&f);
}

static void item6_7_8_balanced_single_replicated(void)
{
    static const char *const three[3] = {"4", "8", "15"};
    fixture f;
    CHECK(fixture_load(&f, fixture_box(buf, sizeof buf, 3, three, "16 GiB", false), 0));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 3, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 3); /* item 6 */
    if (p && p->n_shards == 3) {
        CHECK(p->shards[0].start == 0 && p->shards[0].end == 3);
        CHECK(p->shards[1].start == 3 && p->shards[1].end == 6);
        CHECK(p->shards[2].start == 6 && p->shards[2].end == 8);
        CHECK(p->pages == 0); /* not page-aligned: no page count reported */
    }
    qm_plan_destroy(p);
    p = fixture_plan(&f, 3, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 1); /* item 7 */
    if (p && p->n_shards == 1) {
        CHECK(p->shards[0].start == 0 && p->shards[0].end == 8);
        CHECK_STR(f.m->devices[p->shards[0].device].id, "4");
    }
    qm_plan_destroy(p);
    p = fixture_plan(&f, 3, QM_DTYPE_COMPLEX64, QM_POLICY_REPLICATED, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 3); /* item 8: implemented, not "not implemented" */
    for (int i = 0; p && i < p->n_shards; ++i)
        CHECK(p->shards[i].start == 0 && p->shards[i].end == 8);
    qm_plan_destroy(p);
    /* item 12, second half: balanced never emits an empty shard: 1 qubit over 3 devices */
    p = fixture_plan(&f, 1, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, &rc, &st);
    CHECK(rc == QM_E_SHARDS);
    CHECK_ERR(st, QM_E_SHARDS, "more shards than amplitudes");
    qm_plan_destroy(p);
    fixture_free(&f);
}

/* T3: 3 devices; 0-1 through a PCIe switch, 1-2 through their NUMA node (PHB), 0-2 nothing. */
static const char *t3(const char *a, const char *b, const char *c)
{
    snprintf(buf, sizeof buf,
             "schema: qmesh/1\nname: t3\nsources: [T3 of the conformance tests]\n"
             "hosts:\n  - id: n0\n    numa: [{id: 0}]\n    devices:\n"
             "      - {id: '%s', memory: 16 GiB, hbm_bandwidth: 1 TB/s}\n"
             "      - {id: '%s', memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
             "      - {id: '%s', memory: 16 GiB, hbm_bandwidth: 1 TB/s}\n"
             "    switches:\n      - {id: sw, kind: pcie_switch}\n"
             "links:\n"
             "  - {a: sw, b: '%s', kind: pcie, bandwidth: 24 GB/s}\n"
             "  - {a: sw, b: '%s', kind: pcie, bandwidth: 24 GB/s}\n"
             "  - {a: n0.numa0, b: '%s', kind: pcie, bandwidth: 20 GB/s}\n"
             "  - {a: n0.numa0, b: '%s', kind: pcie, bandwidth: 20 GB/s}\n",
             a, b, c, a, b, b, c);
    return buf;
}

static void item9_t3_balanced_order(void)
{
    fixture f;
    CHECK(fixture_load(&f, t3("10", "11", "12"), 0));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 3, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 3);
    if (p && p->n_shards == 3) {
        CHECK_STR(f.m->devices[p->shards[0].device].id, "11"); /* item 9: [11, 10, 12] */
        CHECK_STR(f.m->devices[p->shards[1].device].id, "10");
        CHECK_STR(f.m->devices[p->shards[2].device].id, "12");
        CHECK_STR(p->gather.target, "11"); /* item 4 through the planner: id, not index */
    }
    qm_plan_destroy(p);
    fixture_free(&f);
}

static const char *two_hosts(void)
{
    snprintf(buf, sizeof buf,
             "schema: qmesh/1\nname: two-hosts\nsources: [test]\n"
             "hosts:\n"
             "  - id: a\n    memory: 1 TiB\n    numa: [{id: 0}]\n    devices:\n"
             "      - {id: a.g0, memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
             "      - {id: a.g1, memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
             "    nics: [{id: a.nic, speed: 200 Gb/s, numa: 0, attach: a.numa0}]\n"
             "  - id: b\n    memory: 1 TiB\n    numa: [{id: 0}]\n    devices:\n"
             "      - {id: b.g0, memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
             "      - {id: b.g1, memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
             "    nics: [{id: b.nic, speed: 200 Gb/s, numa: 0, attach: b.numa0}]\n"
             "links:\n"
             "  - {a: a.numa0, b: a.g0, kind: pcie, bandwidth: 24 GB/s}\n"
             "  - {a: a.numa0, b: a.g1, kind: pcie, bandwidth: 24 GB/s}\n"
             "  - {a: b.numa0, b: b.g0, kind: pcie, bandwidth: 24 GB/s}\n"
             "  - {a: b.numa0, b: b.g1, kind: pcie, bandwidth: 24 GB/s}\n"
             "fabrics:\n  - {id: ib, kind: net, members: [a.nic, b.nic], port_bandwidth: 25 GB/s}\n");
    return buf;
}

static void item10_11_ranks(void)
{
    fixture f;
    CHECK(fixture_load(&f, two_hosts(), 0));
    CHECK(f.m && f.m->n_ranks == 2);
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 4, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 4);
    qm_layout *l0 = NULL, *l1 = NULL, *bad = (qm_layout *)1;
    CHECK_OK(qm_layout_create(p, f.m, 0, 2, &l0, &st));
    CHECK_OK(qm_layout_create(p, f.m, 1, 2, &l1, &st));
    if (l0 && l1) { /* item 11: each rank owns 2 shards and one contiguous range */
        CHECK(l0->n_local == 2 && l1->n_local == 2);
        CHECK(l0->start == 0 && l0->end == 8);
        CHECK(l1->start == 8 && l1->end == 16);
        CHECK(l1->local_shards[0] == 2 && l1->local_shards[1] == 3);
    }
    /* item 10 */
    CHECK(qm_layout_create(p, f.m, 0, 0, &bad, &st) == QM_E_RANK);
    CHECK(bad == NULL);
    CHECK_ERR(st, QM_E_RANK, "world size must be at least 1 (got 0)");
    CHECK(qm_layout_create(p, f.m, 2, 2, &bad, &st) == QM_E_RANK);
    CHECK_ERR(st, QM_E_RANK, "rank 2 is not below the world size 2");
    CHECK(qm_layout_create(p, f.m, 0, 3, &bad, &st) == QM_E_RANK);
    CHECK_ERR(st, QM_E_RANK, "the plan was made for 2 ranks but the world size is 3");
    /* item 15, second half: a shard id out of range */
    qm_plan_shard sh;
    CHECK(qm_layout_shard(p, 4, &sh, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "shard 4 is out of range (the plan has 4 shards)");
    CHECK_OK(qm_layout_shard(p, 3, &sh, &st));
    CHECK(sh.start == 12 && sh.end == 16 && sh.rank == 1);
    qm_layout_destroy(l0);
    qm_layout_destroy(l1);
    qm_plan_destroy(p);
    fixture_free(&f);
}

static void item12_13_14_15(void)
{
    static const char *const four[4] = {"g0", "g1", "g2", "g3"};
    static const char *const six[6] = {"g0", "g1", "g2", "g3", "g4", "g5"};
    fixture f;
    qm_status st;
    qm_code rc;
    CHECK(fixture_load(&f, fixture_box(buf, sizeof buf, 4, four, "80 GiB", true), 0));
    qm_plan *p = fixture_plan(&f, 1, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_E_SHARDS); /* item 12 */
    CHECK_ERR(st, QM_E_SHARDS, "equal: 4 shards for 2 amplitudes (1 qubits): more shards than amplitudes");
    CHECK(p && !p->feasible && p->n_shards == 0);
    qm_plan_destroy(p);
    p = fixture_plan(&f, 0, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_E_QUBITS && p == NULL); /* item 15 */
    CHECK_ERR(st, QM_E_QUBITS, "at least 1");
    fixture_free(&f);

    static const char *const two[2] = {"g0", "g1"};
    CHECK(fixture_load(&f, fixture_box(buf, sizeof buf, 2, two, "80 GiB", true), 0));
    p = fixture_plan(&f, 31, QM_DTYPE_COMPLEX64, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 2); /* item 13: no global 30-qubit cap */
    if (p && p->n_shards == 2)
        CHECK(p->shards[0].end - p->shards[0].start == (uint64_t)1 << 30);
    qm_plan_destroy(p);
    fixture_free(&f);

    CHECK(fixture_load(&f, fixture_box(buf, sizeof buf, 6, six, "141 GB", true), 0));
    p = fixture_plan(&f, 34, QM_DTYPE_COMPLEX64, QM_POLICY_BALANCED, &rc, &st);
    CHECK(rc == QM_OK && p && p->n_shards == 6); /* item 14 */
    if (p && p->n_shards == 6) {
        CHECK_EQ_U64(p->shards[0].start, 0);
        CHECK_EQ_U64(p->shards[0].end, 2863311531ull);
        CHECK_EQ_U64(p->shards[5].start, 14316557654ull);
        CHECK_EQ_U64(p->shards[5].end, 17179869184ull);
        CHECK(p->pages == 0); /* no uniform shard length / shard bits */
    }
    qm_plan_destroy(p);
    fixture_free(&f);
}

int main(void)
{
    item5_equal_two_devices();
    item6_7_8_balanced_single_replicated();
    item9_t3_balanced_order();
    item10_11_ranks();
    item12_13_14_15();
    return qm_test_end("test_conformance_planner");
}
