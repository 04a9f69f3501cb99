/* test_scenario_variant.c — qm_topology_variant (engine/scenario/scenario_variant.c): hosts
 * copied and dropped, devices per host kept and copied, device memory, failed devices; every
 * variant is dumped as qmesh/1 YAML and loaded back by the strict loader (so it is a scenario the
 * loader accepts: ids unique, links and fabrics well formed, ranks complete); and the errors. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "mesh.h"
#include "scenario_loader.h"
#include "scenario_variant.h"
#include "testlib.h"
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char a100_path[1024];

static int find_node(const qm_topology *t, const char *id)
{
    for (int i = 0; i < t->n_nodes; ++i)
        if (strcmp(t->nodes[i].id, id) == 0)
            return i;
    return -1;
}

static int find_fabric(const qm_topology *t, const char *id)
{
    for (int f = 0; f < t->n_fabrics; ++f)
        if (strcmp(t->fabrics[f].id, id) == 0)
            return f;
    return -1;
}

/* The variant dumped and loaded again: the loader's checks pass and the counts survive. */
static void check_round_trip(const qm_topology *v, const char *what)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    qm_status st;
    qm_status_clear(&st);
    CHECK(mem != NULL);
    if (!mem)
        return;
    CHECK_OK(qm_scenario_dump(v, mem, &st));
    fclose(mem);
    qm_topology *back = NULL;
    qm_code rc = qm_scenario_load_string(text, len, what, &back, NULL, &st);
    if (rc != QM_OK)
        fprintf(stderr, "%s: reload failed: %s (line %d)\n", what, st.msg, st.line);
    CHECK(rc == QM_OK);
    if (back) {
        CHECK_EQ_U64(back->n_hosts, v->n_hosts);
        CHECK_EQ_U64(back->n_gpus, v->n_gpus);
        CHECK_EQ_U64(back->n_nodes, v->n_nodes);
        CHECK_EQ_U64(back->n_links, v->n_links);
        CHECK_EQ_U64(back->n_fabrics, v->n_fabrics);
        CHECK_EQ_U64(back->n_ranks, v->n_ranks);
    }
    qm_topology_destroy(back);
    free(text);
}

static qm_topology *variant(const qm_topology *t, qm_variant v, const char *what)
{
    qm_topology *out = NULL;
    qm_status st;
    qm_status_clear(&st);
    qm_code rc = qm_topology_variant(t, &v, &out, &st);
    if (rc != QM_OK)
        fprintf(stderr, "%s: %s\n", what, st.msg);
    CHECK(rc == QM_OK);
    if (out) { /* the defaults travel with the copy: defaults.host_link (implicit device links) */
        CHECK(out->host_link_bw_bytes_per_s == t->host_link_bw_bytes_per_s &&
              out->default_reserve_bytes == t->default_reserve_bytes);
        check_round_trip(out, what);
    }
    return out;
}

static void check_error(const qm_topology *t, qm_variant v, const char *msg)
{
    qm_topology *out = (qm_topology *)1;
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_topology_variant(t, &v, &out, &st) == QM_E_ARG);
    CHECK(out == NULL);
    CHECK_STR(st.msg, msg);
}

/* Usable bytes of the whole mesh and the path class between two devices. */
static uint64_t mesh_usable(const qm_topology *t, int *n_devices)
{
    qm_topo_graph *g = NULL;
    qm_mesh *m = NULL;
    qm_status st;
    uint64_t sum = 0;
    CHECK_OK(qm_topo_graph_create(t, &g, &st));
    CHECK_OK(qm_mesh_create(t, g, 0, &m, &st));
    *n_devices = m ? m->n_devices : 0;
    for (int i = 0; m && i < m->n_devices; ++i)
        sum += m->devices[i].usable_bytes;
    qm_mesh_destroy(m);
    qm_topo_graph_destroy(g);
    return sum;
}

static int path_class(const qm_topology *t, const char *a, const char *b)
{
    qm_topo_graph *g = NULL;
    qm_topo_path p;
    qm_status st;
    CHECK_OK(qm_topo_graph_create(t, &g, &st));
    int cls = -1;
    if (g && qm_topo_graph_path(g, find_node(t, a), find_node(t, b), &p, &st) == QM_OK && p.found)
        cls = (int)p.cls;
    qm_topo_graph_destroy(g);
    return cls;
}

static void test_builtin_hosts(void)
{
    qm_topology *t = NULL, *v = (qm_topology *)1;
    qm_status st;
    CHECK_OK(qm_scenario_load_default(&t, NULL, &st));
    /* the built-in mesh has no network: a second host would not be joined to the first */
    qm_status_clear(&st);
    CHECK(t && qm_topology_variant(t, &(qm_variant){.hosts = 2}, &v, &st) == QM_E_DISCONNECTED);
    CHECK(v == NULL);
    CHECK_STR(st.msg, "whatif: device 'n1.g0' of this variant has no path to device 'n0.g0' (2 "
                      "hosts; no chain of links, fabrics or NIC attachments joins them); the "
                      "scenario has no network between these hosts");
    /* within the host: 2 or 6 devices, and the source is unchanged */
    v = t ? variant(t, (qm_variant){.devices_per_host = 6}, "builtin devices/host=6") : NULL;
    if (v) {
        CHECK_EQ_U64(v->n_gpus, 6);
        CHECK_EQ_U64(v->fabrics[0].n_members, 6);
        CHECK(path_class(v, "n0.g5", "n0.g0") == QM_LINK_NVLINK);
    }
    qm_topology_destroy(v);
    CHECK(t && t->n_hosts == 1 && t->n_gpus == 4);
    qm_topology_destroy(t);
}

static void test_h100_hosts(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/scenarios/h100-2node-ndr.yaml", dir);
    qm_topology *t = NULL;
    qm_status st;
    CHECK_OK(qm_scenario_load_file(path, &t, NULL, &st));
    if (!t)
        return;
    /* n2 copies n1: its NUMA nodes, switches, NVSwitch fabric (a new one), NICs on the shared
     * InfiniBand fabric, its rank */
    qm_topology *v = variant(t, (qm_variant){.hosts = 3}, "h100 hosts=3");
    if (v) {
        CHECK_EQ_U64(v->n_hosts, 3);
        CHECK_STR(v->hosts[2].id, "n2");
        CHECK_EQ_U64(v->n_gpus, 24);
        CHECK_EQ_U64(v->n_ranks, 3);
        CHECK_EQ_U64(v->ranks[2].n_devices, 8);
        CHECK_STR(v->nodes[v->ranks[2].devices[0]].id, "n2.g0");
        CHECK_EQ_U64(v->n_fabrics, 4);
        const int f = find_fabric(v, "n2.nvl");
        CHECK(f >= 0);
        if (f >= 0) {
            CHECK_EQ_U64(v->fabrics[f].n_members, 8);
            CHECK_STR(v->nodes[v->fabrics[f].switch_node].id, "n2.nvs");
            CHECK_STR(v->nodes[v->fabrics[f].members[7]].id, "n2.g7");
        }
        const int ib = find_fabric(v, "ib");
        CHECK(ib >= 0 && v->fabrics[ib].n_members == 24);
        const int g = find_node(v, "n2.g1");
        CHECK(g >= 0 && v->nodes[g].host == 2);
        CHECK(g >= 0 && strcmp(v->nodes[v->nodes[g].numa].id, "n2.numa0") == 0);
        CHECK(path_class(v, "n2.g0", "n2.g7") == QM_LINK_NVLINK);
        CHECK(path_class(v, "n2.g0", "n0.g0") == QM_LINK_NET);
    }
    qm_topology_destroy(v);
    qm_topology_destroy(t);
}

static void test_a100_hosts(const qm_topology *t)
{
    /* fewer: the first 2 hosts, the InfiniBand fabric keeps their 8 NICs */
    qm_topology *v = variant(t, (qm_variant){.hosts = 2}, "a100 hosts=2");
    if (v) {
        CHECK_EQ_U64(v->n_hosts, 2);
        CHECK_EQ_U64(v->n_gpus, 8);
        CHECK_EQ_U64(v->n_ranks, 2);
        CHECK(find_node(v, "n2.g0") < 0);
        const int f = find_fabric(v, "ib");
        CHECK(f >= 0 && v->fabrics[f].n_members == 8);
    }
    qm_topology_destroy(v);
    /* more: n4, n5 copy n3 and join the shared network (the implicit switch "ib" stays one) */
    v = variant(t, (qm_variant){.hosts = 6}, "a100 hosts=6");
    if (v) {
        CHECK_EQ_U64(v->n_hosts, 6);
        CHECK_EQ_U64(v->n_gpus, 24);
        CHECK_EQ_U64(v->n_fabrics, 1);
        CHECK_EQ_U64(v->fabrics[0].n_members, 24);
        CHECK_EQ_U64(v->n_ranks, 6);
        CHECK_EQ_U64(v->ranks[5].rank, 5);
        CHECK_STR(v->hosts[v->ranks[5].host].id, "n5");
        const int nic = find_node(v, "n5.ib2");
        CHECK(nic >= 0 && strcmp(v->nodes[v->nodes[nic].attach].id, "n5.sw1") == 0);
        CHECK(path_class(v, "n5.g0", "n0.g0") == QM_LINK_NET);
        CHECK(path_class(v, "n5.g0", "n5.g3") == QM_LINK_NVLINK);
    }
    qm_topology_destroy(v);
}

static void test_a100_devices(const qm_topology *t)
{
    /* 6 per host: n0.g4 and n0.g5 copy n0.g3 (its NVLink to every other GPU, its PCIe switch),
     * so the host stays all-to-all: C(6,2) = 15 NVLinks per host */
    qm_topology *v = variant(t, (qm_variant){.devices_per_host = 6}, "a100 devices/host=6");
    if (v) {
        CHECK_EQ_U64(v->n_gpus, 24);
        int nvl = 0;
        for (int l = 0; l < v->n_links; ++l)
            nvl += v->links[l].cls == QM_LINK_NVLINK && v->nodes[v->links[l].a].host == 0;
        CHECK_EQ_U64(nvl, 15);
        CHECK(path_class(v, "n0.g4", "n0.g5") == QM_LINK_NVLINK);
        CHECK(path_class(v, "n0.g5", "n0.g0") == QM_LINK_NVLINK);
        const int g5 = find_node(v, "n3.g5");
        CHECK(g5 >= 0 && strcmp(v->nodes[v->nodes[g5].numa].id, "n3.numa1") == 0);
        CHECK_EQ_U64(v->ranks[3].n_devices, 6);
        CHECK_STR(v->nodes[v->ranks[3].devices[5]].id, "n3.g5");
    }
    qm_topology_destroy(v);
    /* 2 per host: g2 and g3 of every host go with their links */
    v = variant(t, (qm_variant){.devices_per_host = 2}, "a100 devices/host=2");
    if (v) {
        CHECK_EQ_U64(v->n_gpus, 8);
        CHECK(find_node(v, "n1.g2") < 0);
        CHECK(find_node(v, "n1.g1") >= 0);
        CHECK_EQ_U64(v->ranks[1].n_devices, 2);
    }
    qm_topology_destroy(v);
}

static void test_a100_memory_without(const qm_topology *t)
{
    /* 80 GiB per device, reserve 1 GiB kept: 16 x 79 GiB usable */
    qm_topology *v = variant(t, (qm_variant){.device_memory_bytes = 80ull << 30}, "a100 80GiB");
    int n = 0;
    if (v) {
        CHECK_EQ_U64(mesh_usable(v, &n), 16 * (79ull << 30));
        CHECK_EQ_U64(n, 16);
    }
    qm_topology_destroy(v);
    /* two failed devices: 14 left, rank 1 holds 3, the NVLinks of n1.g0 are gone */
    static const char ids[2][QM_ID_BYTES] = {"n1.g0", "n2.g3"};
    v = variant(t, (qm_variant){.n_without = 2, .without = ids}, "a100 without");
    if (v) {
        CHECK_EQ_U64(v->n_gpus, 14);
        CHECK_EQ_U64(mesh_usable(v, &n), 14 * (42405855232ull - (1ull << 30)));
        CHECK_EQ_U64(v->ranks[1].n_devices, 3);
        CHECK(find_node(v, "n1.g0") < 0);
        CHECK_EQ_U64(v->n_links, t->n_links - 2 * 4); /* 3 NVLinks + 1 PCIe link each */
    }
    qm_topology_destroy(v);
    /* a whole host failed: its rank is dropped and the others renumbered */
    static const char host1[4][QM_ID_BYTES] = {"n1.g0", "n1.g1", "n1.g2", "n1.g3"};
    v = variant(t, (qm_variant){.n_without = 4, .without = host1}, "a100 without n1");
    if (v) {
        CHECK_EQ_U64(v->n_ranks, 3);
        CHECK_EQ_U64(v->ranks[1].rank, 1);
        CHECK_STR(v->hosts[v->ranks[1].host].id, "n2");
    }
    qm_topology_destroy(v);
}

static void test_errors(const qm_topology *t)
{
    static const char typo[1][QM_ID_BYTES] = {"n1.g9"};
    check_error(t, (qm_variant){.n_without = 1, .without = typo},
                "whatif: --without 'n1.g9': no such device (16 devices in 4 hosts); did you mean "
                "'n1.g0'?");
    static const char far[1][QM_ID_BYTES] = {"gpu-zero"};
    check_error(t, (qm_variant){.n_without = 1, .without = far},
                "whatif: --without 'gpu-zero': no such device (16 devices in 4 hosts)");
    static const char sw[1][QM_ID_BYTES] = {"n0.sw0"};
    check_error(t, (qm_variant){.n_without = 1, .without = sw},
                "whatif: --without 'n0.sw0': not a device but a switch or NIC; name GPU devices");
    check_error(t, (qm_variant){.hosts = QM_VARIANT_MAX_HOSTS + 1},
                "whatif: --hosts 4097 is out of range (1..4096)");
    check_error(t, (qm_variant){.devices_per_host = -1},
                "whatif: --devices-per-host -1 is out of range (1..1024)");
    static const char all[4][QM_ID_BYTES] = {"n0.g0", "n0.g1", "n0.g2", "n0.g3"};
    check_error(t, (qm_variant){.hosts = 1, .n_without = 4, .without = all},
                "whatif: --without: no device is left (4 removed)");
    /* a host without a device cannot grow */
    static const char yaml[] =
        "schema: qmesh/1\nname: storage\n"
        "hosts:\n"
        "  - id: a\n    numa: [{id: 0}]\n"
        "    devices: [{id: a.g0, memory: 16 GiB, hbm_bandwidth: 1 TB/s, numa: 0}]\n"
        "  - id: b\n    numa: [{id: 0}]\n";
    qm_topology *s = NULL;
    qm_status st;
    CHECK_OK(qm_scenario_load_string(yaml, sizeof yaml - 1, "storage.yaml", &s, NULL, &st));
    if (s)
        check_error(s, (qm_variant){.devices_per_host = 2},
                    "whatif: --devices-per-host 2: host 'b' has no device to copy (0 devices)");
    /* its id has no number: copies count from -2 */
    qm_topology *v = s ? variant(s, (qm_variant){.hosts = 3}, "storage hosts=3") : NULL;
    if (v) {
        CHECK_STR(v->hosts[2].id, "b-2");
        CHECK(find_node(v, "b-2.numa0") >= 0);
    }
    qm_topology_destroy(v);
    qm_topology_destroy(s);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_scenario_variant SOURCE_DIR\n");
        return 2;
    }
    snprintf(a100_path, sizeof a100_path, "%s/scenarios/a100-4node-hdr.yaml", argv[1]);
    test_builtin_hosts();
    test_h100_hosts(argv[1]);
    qm_topology *t = NULL;
    qm_status st;
    CHECK_OK(qm_scenario_load_file(a100_path, &t, NULL, &st));
    if (t) {
        test_a100_hosts(t);
        test_a100_devices(t);
        test_a100_memory_without(t);
        test_errors(t);
    }
    qm_topology_destroy(t);
    return qm_test_end("test_scenario_variant");
}
