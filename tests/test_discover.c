/* test_discover.c — `qmesh topo dump` of a real machine (engine/discover.h, docs/discover.md),
 * without a GPU: hand-written facts, a fake sysfs and /proc tree under /tmp, and the CLI.
 *
 * Correctness: the PCIe and NVLink figures (exact doubles), bus id normalization, the sysfs
 * readers (NUMA node, current and maximum link, the upstream port, the node list), the /proc
 * reader, facts -> topology -> qmesh/1 text -> loaded topology with no diagnostics and every field
 * equal (2 GPUs, exact memory and usable bytes, NUMA placement, the PCIe, NVLink and sys links,
 * paths through the graph), NVSwitch systems, `topo validate` accepting the dump, the missing-NVML
 * note. Validation: E-IO naming the missing sysfs or /proc file, E-INPUT for text that does not
 * parse, E-ARG for facts the builder cannot use, the CLI's usage errors. Storage: the host's
 * figures and note through the dump, QM_STORAGE_RATES, the measurement's errors and one real
 * 8 MiB measurement (positive values, the note, no temporary left).
 * Arguments (optional): the qmesh binary, for the CLI section. On a machine with a GPU the CLI
 * section expects the discovered machine instead of the built-in mesh.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, symlink, popen, open_memstream */
#include "cuda_backend.h"
#include "cuda_discover.h"
#include "discover.h"
#include "materialize_internal.h"
#include "mesh.h"
#include "scenario_loader.h"
#include "sim_fixtures.h"
#include "testlib.h"
#include "topology.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64]; /* the fake tree: <g_dir>/sys/..., <g_dir>/proc/meminfo */

/* ---- helpers ----------------------------------------------------------------------------------- */

static void put_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

/* mkdir -p <g_dir>/<rel> */
static void make_dirs(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    for (char *p = path + strlen(g_dir) + 1; *p; ++p) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    mkdir(path, 0755);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The fake tree of two GPUs:
 *   0000:17:00.0  a plain directory: numa_node 1, 32.0 GT/s x16 now, no maximum files
 *   0000:31:00.0  a link into devices/pci0000:30/0000:30:01.0/ (its upstream port): numa_node -1,
 *                 2.5 GT/s x16 now (idle), maximum 32.0 GT/s x16, the port's maximum 16.0 GT/s x16
 *   NUMA nodes 0 and 1, plus the files sysfs keeps next to them. */
static void make_tree(void)
{
    make_dirs("sys/bus/pci/devices/0000:17:00.0");
    put_file("sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n");
    put_file("sys/bus/pci/devices/0000:17:00.0/current_link_speed", "32.0 GT/s PCIe\n");
    put_file("sys/bus/pci/devices/0000:17:00.0/current_link_width", "16\n");
    make_dirs("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0");
    put_file("sys/devices/pci0000:30/0000:30:01.0/max_link_speed", "16.0 GT/s PCIe\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/max_link_width", "16\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/numa_node", "-1\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/current_link_speed",
             "2.5 GT/s PCIe\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/current_link_width", "16\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/max_link_speed", "32.0 GT/s PCIe\n");
    put_file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/max_link_width", "16\n");
    char link[512];
    snprintf(link, sizeof link, "%s/sys/bus/pci/devices/0000:31:00.0", g_dir);
    CHECK(symlink("../../../devices/pci0000:30/0000:30:01.0/0000:31:00.0", link) == 0);
    make_dirs("sys/devices/system/node/node0");
    make_dirs("sys/devices/system/node/node1");
    put_file("sys/devices/system/node/online", "0-1\n");
    put_file("sys/devices/system/node/has_cpu", "0-1\n");
    make_dirs("proc");
    put_file("proc/meminfo", "MemFree:        1000 kB\nMemTotal:       263855520 kB\n");
}

#define H200_BYTES 150754820096ull /* 143771 MiB, nvidia-smi's total on an H200 */
#define H200_HBM 3352320000000.0   /* 2 x 2619000 kHz x 5120 bits / 8 */

/* Two H200-like GPUs, peer access both ways, 18 NVLinks between them. */
static void hand_facts(qm_discover_facts *f)
{
    qm_discover_facts_init(f);
    snprintf(f->hostname, sizeof f->hostname, "testhost");
    snprintf(f->date, sizeof f->date, "2026-12-02 12:00 UTC");
    f->host_memory_bytes = 2ull << 40;
    f->n_gpus = 2;
    for (int i = 0; i < 2; ++i) {
        qm_discover_gpu *g = &f->gpus[i];
        snprintf(g->name, sizeof g->name, "NVIDIA H200");
        g->memory_bytes = H200_BYTES;
        g->hbm_bw_bytes_per_s = 2.0 * 2619000 * 1e3 * (5120 / 8.0);
        g->sm_count = 132;
        g->cc_major = 9;
        g->cc_minor = 0;
    }
    f->gpus[0].free_bytes = H200_BYTES - (512ull << 20); /* the context held 512 MiB */
    snprintf(f->gpus[0].bus_id, sizeof f->gpus[0].bus_id, "0000:17:00.0");
    snprintf(f->gpus[1].bus_id, sizeof f->gpus[1].bus_id, "0000:31:00.0");
    f->peer[0][1] = f->peer[1][0] = 1;
    f->nvlinks[0][1] = f->nvlinks[1][0] = 18;
    f->nvlink_state = QM_DISCOVER_NVLINK_READ;
    f->sources = QM_DISCOVER_SRC_CUDA | QM_DISCOVER_SRC_MEMINFO | QM_DISCOVER_SRC_NVML;
}

/* hand_facts with the first GPU only, its PCIe link (Gen4 x16) as sysfs would give it. */
static void one_gpu_facts(qm_discover_facts *f)
{
    hand_facts(f);
    f->n_gpus = 1;
    f->gpus[0].link_cur_gts = 16.0;
    f->gpus[0].link_cur_width = 16;
}

/* Dump t to text (malloc'd) and load it back; CHECKs that it loads with no diagnostics. */
static qm_topology *round_trip(const qm_topology *t, char **text_out)
{
    char *text = NULL;
    size_t len = 0;
    qm_status st;
    qm_status_clear(&st);
    FILE *mem = open_memstream(&text, &len);
    CHECK(mem != NULL);
    if (!mem)
        return NULL;
    CHECK_OK(qm_scenario_dump(t, mem, &st));
    fclose(mem);
    qm_diags d;
    qm_diags_init(&d);
    qm_topology *back = NULL;
    qm_code rc = qm_scenario_load_string(text, len, "discovered.yaml", &back, &d, &st);
    CHECK(rc == QM_OK);
    CHECK(d.n == 0);
    if (rc != QM_OK || d.n) {
        qm_diags_print(&d, stderr);
        fputs(text, stderr);
    }
    qm_diags_fini(&d);
    if (text_out)
        *text_out = text;
    else
        free(text);
    return back;
}

/* Every field the builder fills is equal in a and b. */
static void check_same(const qm_topology *a, const qm_topology *b)
{
    CHECK_STR(a->name, b->name);
    CHECK(a->description && b->description);
    if (a->description && b->description)
        CHECK_STR(a->description, b->description);
    CHECK(a->n_sources == b->n_sources);
    for (int i = 0; i < a->n_sources && i < b->n_sources; ++i)
        CHECK_STR(a->sources[i], b->sources[i]);
    CHECK_EQ_U64(a->default_reserve_bytes, b->default_reserve_bytes);
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
        CHECK(a->efficiency[c] == b->efficiency[c]);
        CHECK(a->latency_s[c] == b->latency_s[c]);
    }
    CHECK(a->hbm_efficiency == b->hbm_efficiency);
    CHECK(a->n_device_types == b->n_device_types);
    for (int i = 0; i < a->n_device_types && i < b->n_device_types; ++i) {
        CHECK_STR(a->device_types[i].name, b->device_types[i].name);
        CHECK_EQ_U64(a->device_types[i].memory_bytes, b->device_types[i].memory_bytes);
        CHECK(a->device_types[i].hbm_bw_bytes_per_s == b->device_types[i].hbm_bw_bytes_per_s);
        CHECK(a->device_types[i].sm_count == b->device_types[i].sm_count);
        CHECK_STR(a->device_types[i].arch, b->device_types[i].arch);
    }
    CHECK(a->n_hosts == b->n_hosts);
    for (int i = 0; i < a->n_hosts && i < b->n_hosts; ++i) {
        CHECK_STR(a->hosts[i].id, b->hosts[i].id);
        CHECK_EQ_U64(a->hosts[i].memory_bytes, b->hosts[i].memory_bytes);
    }
    CHECK(a->n_nodes == b->n_nodes);
    for (int i = 0; i < a->n_nodes && i < b->n_nodes; ++i) {
        const qm_node *x = &a->nodes[i], *y = &b->nodes[i];
        CHECK_STR(x->id, y->id);
        CHECK(x->kind == y->kind && x->host == y->host && x->numa == y->numa &&
              x->type == y->type && x->attach == y->attach);
        CHECK_EQ_U64(x->memory_bytes, y->memory_bytes);
        CHECK_EQ_U64(x->reserve_bytes, y->reserve_bytes);
        CHECK(x->hbm_bw_bytes_per_s == y->hbm_bw_bytes_per_s);
    }
    CHECK(a->n_links == b->n_links);
    for (int i = 0; i < a->n_links && i < b->n_links; ++i) {
        const qm_link *x = &a->links[i], *y = &b->links[i];
        CHECK(x->a == y->a && x->b == y->b && x->cls == y->cls && x->fabric == y->fabric);
        CHECK(x->bw_ab_bytes_per_s == y->bw_ab_bytes_per_s);
        CHECK(x->bw_ba_bytes_per_s == y->bw_ba_bytes_per_s);
        CHECK(x->latency_s == y->latency_s);
    }
    CHECK(a->n_gpus == b->n_gpus);
    for (int i = 0; i < a->n_gpus && i < b->n_gpus; ++i)
        CHECK(a->gpus[i] == b->gpus[i]);
    CHECK(a->n_ranks == b->n_ranks && a->ranks_given == b->ranks_given);
    for (int r = 0; r < a->n_ranks && r < b->n_ranks; ++r) {
        CHECK(a->ranks[r].rank == b->ranks[r].rank && a->ranks[r].host == b->ranks[r].host);
        CHECK(a->ranks[r].n_devices == b->ranks[r].n_devices);
        for (int d = 0; d < a->ranks[r].n_devices && d < b->ranks[r].n_devices; ++d)
            CHECK(a->ranks[r].devices[d] == b->ranks[r].devices[d]);
    }
}

static int node_of(const qm_topology *t, const char *id)
{
    for (int i = 0; i < t->n_nodes; ++i)
        if (strcmp(t->nodes[i].id, id) == 0)
            return i;
    return -1;
}

/* The link between the nodes named a and b (either order), or NULL. */
static const qm_link *link_of(const qm_topology *t, const char *a, const char *b)
{
    int x = node_of(t, a), y = node_of(t, b);
    for (int i = 0; i < t->n_links; ++i) {
        const qm_link *l = &t->links[i];
        if ((l->a == x && l->b == y) || (l->a == y && l->b == x))
            return l;
    }
    return NULL;
}

static bool has_source(const qm_topology *t, const char *part)
{
    for (int i = 0; i < t->n_sources; ++i)
        if (strstr(t->sources[i], part))
            return true;
    return false;
}

/* ---- pure figures ------------------------------------------------------------------------------ */

static void test_figures(void)
{
    /* 32 GT/s x 16 lanes x 128/130 / 8 = 63.015384615... GB/s: the nearest double */
    CHECK(qm_discover_pcie_bw(32.0, 16) == 32e9 * 16 * 128.0 / 130.0 / 8.0);
    CHECK(qm_discover_pcie_bw(32.0, 16) == 63015384615.384615);
    CHECK(qm_discover_pcie_bw(16.0, 16) == 31507692307.692307); /* gen4 x16 */
    CHECK(qm_discover_pcie_bw(8.0, 16) == 8e9 * 16 * 128.0 / 130.0 / 8.0);
    CHECK(qm_discover_pcie_bw(2.5, 16) == 4e9); /* gen1: 8b/10b */
    CHECK(qm_discover_pcie_bw(5.0, 8) == 4e9);  /* gen2 x8 */
    CHECK(qm_discover_pcie_bw(0, 16) == 0 && qm_discover_pcie_bw(32.0, 0) == 0);
    CHECK(qm_discover_nvlink_bw_per_link(9, 0) == 25e9);
    CHECK(qm_discover_nvlink_bw_per_link(8, 0) == 25e9);
    CHECK(qm_discover_nvlink_bw_per_link(8, 6) == 14.0625e9);
    CHECK(qm_discover_nvlink_bw_per_link(10, 0) == 50e9);
    CHECK(qm_discover_nvlink_bw_per_link(6, 0) == 20e9);

    char bus[QM_DISCOVER_BUS_ID_BYTES];
    qm_status st;
    qm_status_clear(&st);
    CHECK_OK(qm_discover_bus_id_normalize("0000:1B:00.0", bus, &st));
    CHECK_STR(bus, "0000:1b:00.0");
    CHECK_OK(qm_discover_bus_id_normalize("00000000:1B:00.0", bus, &st)); /* NVML's form */
    CHECK_STR(bus, "0000:1b:00.0");
    CHECK_OK(qm_discover_bus_id_normalize("0001:c3:1f.7", bus, &st));
    CHECK_STR(bus, "0001:c3:1f.7");
    CHECK(qm_discover_bus_id_normalize("1b:00.0", bus, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "'1b:00.0' is not a PCI bus id");
    CHECK(qm_discover_bus_id_normalize("0000:1b:00.0 ", bus, &st) == QM_E_INPUT);
    CHECK(qm_discover_bus_id_normalize("0000:1b:20.0", bus, &st) == QM_E_INPUT); /* device > 31 */
    CHECK(qm_discover_bus_id_normalize("0000:1b:00.8", bus, &st) == QM_E_INPUT);
}

/* ---- readers ----------------------------------------------------------------------------------- */

static void test_readers(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    char sys[128], proc[128];
    snprintf(sys, sizeof sys, "%s/sys", g_dir);
    snprintf(proc, sizeof proc, "%s/proc", g_dir);
    qm_status st;
    qm_status_clear(&st);
    hand_facts(f);
    f->sources = 0;
    CHECK_OK(qm_discover_facts_from_sysfs(sys, f, &st));
    CHECK(f->gpus[0].numa == 1);
    CHECK(f->gpus[0].link_cur_gts == 32.0 && f->gpus[0].link_cur_width == 16);
    CHECK(f->gpus[0].link_max_gts == 0 && f->gpus[0].link_max_width == 0); /* no max files */
    CHECK(f->gpus[1].numa == -1);
    CHECK(f->gpus[1].link_cur_gts == 2.5 && f->gpus[1].link_cur_width == 16);
    CHECK(f->gpus[1].link_max_gts == 16.0); /* min(GPU 32.0, upstream port 16.0) */
    CHECK(f->gpus[1].link_max_width == 16);
    CHECK(f->n_numa == 2 && f->numa_ids[0] == 0 && f->numa_ids[1] == 1);
    CHECK(f->sources == (QM_DISCOVER_SRC_SYSFS_PCI | QM_DISCOVER_SRC_SYSFS_NODE));

    CHECK_OK(qm_discover_facts_from_host(proc, f, &st));
    CHECK_EQ_U64(f->host_memory_bytes, 263855520ull * 1024);
    CHECK(f->hostname[0] != '\0');
    CHECK(strlen(f->date) == strlen("2026-12-02 12:00 UTC") && strstr(f->date, " UTC"));
    CHECK(f->sources & QM_DISCOVER_SRC_MEMINFO);

    /* a missing file: E-IO naming the path */
    char path[512];
    snprintf(path, sizeof path, "%s/bus/pci/devices/0000:17:00.0/current_link_width", sys);
    char saved[600];
    snprintf(saved, sizeof saved, "%s.saved", path);
    CHECK(rename(path, saved) == 0);
    CHECK(qm_discover_facts_from_sysfs(sys, f, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, path);
    CHECK_ERR(st, QM_E_IO, "No such file or directory");
    CHECK(rename(saved, path) == 0);
    /* a GPU whose device directory does not exist */
    hand_facts(f);
    snprintf(f->gpus[1].bus_id, sizeof f->gpus[1].bus_id, "0000:99:00.0");
    CHECK(qm_discover_facts_from_sysfs(sys, f, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "/bus/pci/devices/0000:99:00.0/numa_node");
    /* text that does not parse: E-INPUT naming the path and the text */
    hand_facts(f);
    put_file("sys/bus/pci/devices/0000:17:00.0/current_link_speed", "Unknown\n");
    CHECK(qm_discover_facts_from_sysfs(sys, f, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "0000:17:00.0/current_link_speed: cannot read a link speed from "
                              "'Unknown' (expected e.g. '32.0 GT/s PCIe')");
    put_file("sys/bus/pci/devices/0000:17:00.0/current_link_speed", "32.0 GT/s PCIe\n");
    put_file("sys/bus/pci/devices/0000:17:00.0/numa_node", "one\n");
    CHECK(qm_discover_facts_from_sysfs(sys, f, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "0000:17:00.0/numa_node: 'one' is not an integer in [-1, 1000000]");
    put_file("sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n");
    /* a GPU without a bus id */
    hand_facts(f);
    f->gpus[0].bus_id[0] = '\0';
    CHECK(qm_discover_facts_from_sysfs(sys, f, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "GPU 0 (NVIDIA H200) has no PCI bus id");
    /* no NUMA directory (a kernel without NUMA): no node listed, not an error */
    hand_facts(f);
    char fake_root[128];
    snprintf(fake_root, sizeof fake_root, "%s/sys/devices/system", g_dir);
    snprintf(path, sizeof path, "%s/node", fake_root);
    snprintf(saved, sizeof saved, "%s/node.saved", fake_root);
    CHECK(rename(path, saved) == 0);
    CHECK_OK(qm_discover_facts_from_sysfs(sys, f, &st));
    CHECK(f->n_numa == 0 && !(f->sources & QM_DISCOVER_SRC_SYSFS_NODE));
    CHECK(rename(saved, path) == 0);

    /* /proc: missing file, no MemTotal */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/nowhere", g_dir);
    CHECK(qm_discover_facts_from_host(bad, f, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "/nowhere/meminfo");
    put_file("proc/meminfo", "MemFree: 12 kB\n");
    CHECK(qm_discover_facts_from_host(proc, f, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "has no 'MemTotal: N kB' line");
    put_file("proc/meminfo", "MemTotal:       263855520 kB\n");
    free(f);
}

/* ---- facts -> topology -> text -> topology ----------------------------------------------------- */

static void test_build_round_trip(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    char sys[128];
    snprintf(sys, sizeof sys, "%s/sys", g_dir);
    qm_status st;
    qm_status_clear(&st);
    hand_facts(f);
    CHECK_OK(qm_discover_facts_from_sysfs(sys, f, &st));
    qm_topology *t = NULL, *back = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    if (!t) {
        free(f);
        return;
    }
    char *text = NULL;
    back = round_trip(t, &text);
    if (!back) {
        qm_topology_destroy(t);
        free(f);
        free(text);
        return;
    }
    check_same(t, back);

    /* what the loaded scenario says */
    CHECK_STR(back->name, "discovered-testhost");
    CHECK(strstr(back->description, "qmesh topo dump of testhost at 2026-12-02 12:00 UTC: "
                                    "2 x NVIDIA H200, 2 NUMA nodes") != NULL);
    CHECK(strstr(back->description, "NVLink read with NVML: 1 GPU pair, 0 GPUs on NVSwitch"));
    CHECK(strstr(back->description, "PCIe links trained down when read (idle): n0.g1 at 2.5 GT/s "
                                    "x16 (modelled at 16 GT/s x16)"));
    CHECK(has_source(back, "CUDA runtime: cudaGetDeviceProperties"));
    CHECK(has_source(back, "/sys/bus/pci/devices/<bus id>/numa_node"));
    CHECK(has_source(back, "/sys/devices/system/node/node<k>"));
    CHECK(has_source(back, "/proc/meminfo MemTotal"));
    CHECK(has_source(back, "NVML (libnvidia-ml.so.1 through dlopen)"));
    CHECK(has_source(back, "assumed: sys links between NUMA nodes at 40 GB/s per direction"));
    CHECK(has_source(back, "assumed: NVLink 25 GB/s per link per direction"));
    /* the assumed figures say where they come from, inside the repository or in public sources */
    CHECK(has_source(back, "40 GB/s per direction (NCCL src/graph/topo.h ERP_QPI_BW: the Emerald "
                           "Rapids socket link)"));
    CHECK(has_source(back, "(line rate; NVLink4: 18 x 25 GB/s = 450 GB/s, NVIDIA's 900 GB/s both "
                           "ways)"));
    CHECK(has_source(back, "(totalGlobalMem - cudaMemGetInfo free)"));
    CHECK(back->n_hosts == 1);
    CHECK_STR(back->hosts[0].id, "n0");
    CHECK_EQ_U64(back->hosts[0].memory_bytes, 2ull << 40);
    CHECK(back->n_device_types == 1);
    CHECK_STR(back->device_types[0].name, "nvidia-h200");
    CHECK_EQ_U64(back->device_types[0].memory_bytes, H200_BYTES);
    CHECK(back->device_types[0].hbm_bw_bytes_per_s == H200_HBM);
    CHECK(back->device_types[0].sm_count == 132);
    CHECK_STR(back->device_types[0].arch, "sm_90");
    CHECK(back->n_gpus == 2);
    int g0 = node_of(back, "n0.g0"), g1 = node_of(back, "n0.g1");
    CHECK(g0 >= 0 && g1 >= 0);
    if (g0 >= 0 && g1 >= 0) {
        CHECK(back->gpus[0] == g0 && back->gpus[1] == g1);
        CHECK_STR(back->nodes[back->nodes[g0].numa].id, "n0.numa1"); /* numa_node 1 */
        CHECK_STR(back->nodes[back->nodes[g1].numa].id, "n0.numa0"); /* numa_node -1 -> 0 */
        CHECK_EQ_U64(back->nodes[g0].reserve_bytes, 512ull << 20);
        CHECK_EQ_U64(back->nodes[g1].reserve_bytes, 0);
    }
    CHECK(node_of(back, "n0.numa0") >= 0 && node_of(back, "n0.numa1") >= 0);
    CHECK(back->n_links == 4);
    const qm_link *l = link_of(back, "n0.numa1", "n0.g0");
    CHECK(l && l->cls == QM_LINK_PCIE && l->latency_s < 0);
    CHECK(l && l->bw_ab_bytes_per_s == 63015384615.384615 && l->bw_ba_bytes_per_s == 63015384615.384615);
    l = link_of(back, "n0.numa0", "n0.g1");
    CHECK(l && l->cls == QM_LINK_PCIE && l->bw_ab_bytes_per_s == 31507692307.692307);
    l = link_of(back, "n0.g0", "n0.g1");
    CHECK(l && l->cls == QM_LINK_NVLINK && l->bw_ab_bytes_per_s == 450e9 &&
          l->bw_ba_bytes_per_s == 450e9);
    l = link_of(back, "n0.numa0", "n0.numa1");
    CHECK(l && l->cls == QM_LINK_SYS && l->bw_ab_bytes_per_s == 40e9);
    CHECK(back->n_ranks == 1 && back->ranks_given && back->ranks[0].n_devices == 2);
    /* the text: the ranks section and the exact PCIe figure */
    CHECK(strstr(text, "ranks:\n  - {rank: 0, host: n0, devices: [n0.g0, n0.g1]}") != NULL);

    /* defaults are the loader's own */
    static const char minimal[] = "schema: qmesh/1\nname: m\nhosts:\n  - id: h\n    devices:\n"
                                  "      - {id: g, memory: 1 GiB, hbm_bandwidth: 1 TB/s}\n";
    qm_topology *m = NULL;
    CHECK_OK(qm_scenario_load_string(minimal, strlen(minimal), "m.yaml", &m, NULL, &st));
    if (m) {
        for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
            CHECK(t->latency_s[c] == m->latency_s[c]);
            CHECK(t->efficiency[c] == m->efficiency[c]);
        }
        CHECK(t->hbm_efficiency == m->hbm_efficiency);
        CHECK_EQ_U64(t->default_reserve_bytes, m->default_reserve_bytes);
    }
    qm_topology_destroy(m);

    /* replayed: the mesh's usable bytes and the paths the planner will use */
    qm_topo_graph *g = NULL;
    qm_mesh *mesh = NULL;
    CHECK_OK(qm_topo_graph_create(back, &g, &st));
    if (g)
        CHECK_OK(qm_mesh_create(back, g, 0, &mesh, &st));
    if (mesh) {
        CHECK(mesh->n_devices == 2);
        for (int i = 0; i < mesh->n_devices; ++i) {
            const qm_mesh_device *d = &mesh->devices[i];
            CHECK_EQ_U64(d->memory_bytes, H200_BYTES);
            CHECK_EQ_U64(d->usable_bytes,
                         strcmp(d->id, "n0.g0") == 0 ? H200_BYTES - (512ull << 20) : H200_BYTES);
        }
        qm_topo_path p;
        CHECK_OK(qm_topo_graph_path(g, g0, g1, &p, &st));
        CHECK(p.found && p.cls == QM_LINK_NVLINK && p.bw_bytes_per_s == 450e9);
        CHECK_OK(qm_topo_graph_ingest_path(g, g0, true, &p, &st));
        CHECK(p.found && p.cls == QM_LINK_PCIE && p.bw_bytes_per_s == 63015384615.384615);
    }
    qm_mesh_destroy(mesh);
    qm_topo_graph_destroy(g);

    /* `qmesh topo validate` accepts the dump */
    char path[512];
    snprintf(path, sizeof path, "%s/discovered.yaml", g_dir);
    FILE *fy = fopen(path, "w");
    CHECK(fy != NULL);
    if (fy) {
        fputs(text, fy);
        fclose(fy);
        char *argv[] = {"validate", path, NULL};
        char *outbuf = NULL, *errbuf = NULL;
        size_t on = 0, en = 0;
        FILE *o = open_memstream(&outbuf, &on), *e = open_memstream(&errbuf, &en);
        CHECK(qm_cli_topo_validate_to(2, argv, o, e) == 0);
        fclose(o);
        fclose(e);
        CHECK(strstr(outbuf, ": ok (1 hosts, 2 devices, 4 links, 0 cases)") != NULL);
        CHECK(en == 0);
        if (en)
            fputs(errbuf, stderr);
        free(outbuf);
        free(errbuf);
    }
    free(text);
    qm_topology_destroy(back);
    qm_topology_destroy(t);

    /* no peer access: the NVLink fact alone makes no link */
    hand_facts(f);
    CHECK_OK(qm_discover_facts_from_sysfs(sys, f, &st));
    f->peer[0][1] = f->peer[1][0] = 0;
    CHECK_OK(qm_discover_build(f, &t, &st));
    if (t) {
        CHECK(t->n_links == 3 && !link_of(t, "n0.g0", "n0.g1"));
        CHECK(strstr(t->description, "NVLink read with NVML: 0 GPU pairs"));
        CHECK(!has_source(t, "assumed: NVLink"));
    }
    qm_topology_destroy(t);
    free(f);
}

/* One GPU with numa_node -1 and no NUMA list: node 0 only, no sys link; NVML missing. */
static void test_single_and_no_nvml(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    qm_status st;
    qm_status_clear(&st);
    one_gpu_facts(f);
    f->hostname[0] = '\0';
    f->date[0] = '\0';
    f->host_memory_bytes = 0;
    f->sources = QM_DISCOVER_SRC_CUDA;
    qm_nvml_discover_links("libqmesh-test-no-such-nvml.so.1", f);
    CHECK(f->nvlink_state == QM_DISCOVER_NVLINK_NO_LIBRARY);
    CHECK_STR(f->nvlink_note, "NVLink state not read: libnvidia-ml not available");
    qm_topology *t = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    qm_topology *back = t ? round_trip(t, NULL) : NULL;
    if (back) {
        check_same(t, back);
        CHECK_STR(back->name, "discovered-localhost");
        CHECK(strstr(back->description, "qmesh topo dump of this host: 1 x NVIDIA H200, 1 NUMA "
                                        "node; NVLink state not read: libnvidia-ml not available"));
        CHECK(has_source(back, "NVLink state not read: libnvidia-ml not available"));
        CHECK(has_source(back, "no NUMA node list read"));
        CHECK(!has_source(back, "assumed: sys links"));
        CHECK(back->n_nodes == 2 && back->n_links == 1);
        CHECK_STR(back->nodes[0].id, "n0.numa0");
        CHECK(back->nodes[1].numa == 0);
        CHECK(back->hosts[0].memory_bytes == 0);
        CHECK(back->links[0].bw_ab_bytes_per_s == 31507692307.692307);
    }
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    free(f);
}

/* Storage (docs/discover.md "Storage"): facts -> the host's storage figures with the note as a
 * comment, loaded back equal; the measurement's test hook (QM_STORAGE_RATES), its errors, and a
 * real 8 MiB measurement in the fake tree's folder (its values only checked positive: no test
 * depends on timing; the note and the removed temporary exactly). */
static int count_temporaries(void)
{
    char cmd[200];
    /* the probe file and its writer's temporary (..qmesh-storage-*.qmesh-tmp.*) */
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c 'qmesh-storage-'", g_dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static void test_storage(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    qm_status st;
    qm_status_clear(&st);
    one_gpu_facts(f);
    f->storage = (qm_discover_storage){.read_bw_bytes_per_s = 7e9, .write_bw_bytes_per_s = 1.5e9,
                                       .cached_read_bw_bytes_per_s = 25e9};
    snprintf(f->storage.note, sizeof f->storage.note, "measured by the test");
    qm_topology *t = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    char *text = NULL;
    qm_topology *back = t ? round_trip(t, &text) : NULL;
    if (back) {
        CHECK(strstr(text, "    # storage: measured by the test\n"
                           "    storage: {read: 7 GB/s, write: 1.5 GB/s, cached_read: 25 GB/s}\n") != NULL);
        CHECK(strstr(text, "  storage: {read: 6 GB/s, write: 2 GB/s, cached_read: 20 GB/s, remove: "
                           "100 GB/s}\n"
                           "  host_copy: 10 GB/s\n  launch: 10 us\n"
                           "  page_lock: {buffer: 3.8 ms, rate: 16 GB/s}\n"));
        CHECK(qm_host_cached_read_bw(back, 0) == 25e9);
        CHECK(back->launch_s == 10e-6);
        CHECK(back->hosts[0].storage_read_bw_bytes_per_s == 7e9);
        CHECK(back->hosts[0].storage_write_bw_bytes_per_s == 1.5e9);
        double r, w;
        qm_host_storage_bw(back, 0, &r, &w);
        CHECK(r == 7e9 && w == 1.5e9);
    }
    free(text);
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    /* not measured: no storage on the host, the defaults apply */
    f->storage = (qm_discover_storage){0};
    CHECK_OK(qm_discover_build(f, &t, &st));
    back = t ? round_trip(t, &text) : NULL;
    if (back) {
        CHECK(strstr(text, "    storage:") == NULL && strstr(text, "# storage") == NULL);
        double r, w;
        qm_host_storage_bw(back, 0, &r, &w);
        CHECK(r == 6e9 && w == 2e9);
        CHECK(qm_host_cached_read_bw(back, 0) == 20e9);
    }
    free(text);
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    free(f);

    qm_discover_storage s;
    setenv("QM_STORAGE_RATES", "7 GB/s,1.5 GB/s", 1);
    CHECK_OK(qm_discover_storage_measure("/nonexistent-qmesh-dir", 1, &s, &st));
    CHECK(s.read_bw_bytes_per_s == 7e9 && s.write_bw_bytes_per_s == 1.5e9);
    CHECK_STR(s.note, "from QM_STORAGE_RATES (not measured)");
    CHECK(s.cached_read_bw_bytes_per_s == 0); /* not stated: the defaults' applies */
    setenv("QM_STORAGE_RATES", "7 GB/s,1.5 GB/s,30 GB/s", 1);
    CHECK_OK(qm_discover_storage_measure("/nonexistent-qmesh-dir", 1, &s, &st));
    CHECK(s.read_bw_bytes_per_s == 7e9 && s.write_bw_bytes_per_s == 1.5e9 &&
          s.cached_read_bw_bytes_per_s == 30e9);
    setenv("QM_STORAGE_RATES", "7 GB/s,1.5 GB/s,30", 1);
    CHECK(qm_discover_storage_measure(g_dir, 8 << 20, &s, &st) == QM_E_UNIT);
    CHECK(strncmp(st.msg, "QM_STORAGE_RATES: ", 18) == 0 && strstr(st.msg, "'30'"));
    setenv("QM_STORAGE_RATES", "7 GB/s", 1);
    CHECK(qm_discover_storage_measure(g_dir, 8 << 20, &s, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "QM_STORAGE_RATES: expected READ,WRITE[,CACHED_READ] bandwidths such as "
                      "'6 GB/s,2 GB/s,20 GB/s' (got '7 GB/s')");
    setenv("QM_STORAGE_RATES", "7 GB/s,2 GB", 1);
    CHECK(qm_discover_storage_measure(g_dir, 8 << 20, &s, &st) == QM_E_UNIT);
    CHECK(strncmp(st.msg, "QM_STORAGE_RATES: ", 18) == 0 && strstr(st.msg, "'2 GB'"));
    unsetenv("QM_STORAGE_RATES");
    CHECK(qm_discover_storage_measure(g_dir, 1 << 20, &s, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "storage: the measurement needs at least 8 MiB (got 1048576 bytes)");
    CHECK(qm_discover_storage_measure("/nonexistent-qmesh-dir", 8 << 20, &s, &st) == QM_E_IO);
    CHECK_STR(st.msg, "storage: cannot create a temporary file in /nonexistent-qmesh-dir: No such "
                      "file or directory");
    /* the read back uses encode's reader thread count: QM_READ_THREADS, here 3 and then 1 */
    const char *saved = getenv("QM_READ_THREADS");
    char keep[32] = "";
    if (saved)
        snprintf(keep, sizeof keep, "%s", saved);
    const char *counts[] = {"3", "1"};
    const char *words[] = {"3 reader threads", "1 reader thread"};
    for (int i = 0; i < 2; ++i) {
        setenv("QM_READ_THREADS", counts[i], 1);
        CHECK_OK(qm_discover_storage_measure(g_dir, (8 << 20) + 5, &s, &st));
        CHECK(s.read_bw_bytes_per_s > 0 && s.write_bw_bytes_per_s > 0 &&
              s.cached_read_bw_bytes_per_s > 0);
        /* the page-cache probe: passes over the 8 MiB + 5 file up to 2 GiB, at most 16, timed 3
         * times (the median rate) */
        char want[448];
        snprintf(want, sizeof want, "measured by qmesh topo dump: 8.00 MiB written to %s as "
                 "encode --out writes (fallocate, 4 threads, 8 x 2.00 MiB in flight, fsync, "
                 "rename), dropped from the page cache, read back; then 128.00 MiB (up to 16 "
                 "passes, 2 s) from the page cache, the median of 3 timings; %s; then removed as an "
                 "output that a new one replaces (unlink, the folder synced)", g_dir, words[i]);
        CHECK_STR(s.note, want);
        CHECK(s.remove_bw_bytes_per_s > 0);
        CHECK(count_temporaries() == 0);
    }
    if (saved)
        setenv("QM_READ_THREADS", keep, 1);
    else
        unsetenv("QM_READ_THREADS");

    /* residency: the hook's fraction exactly; a malformed one E-ARG; a missing file 0; a real
     * file some fraction in [0, 1] (what the page cache holds is not ours to assert) */
    double frac = -1;
    setenv("QM_INPUT_RESIDENT", "0.375", 1);
    CHECK_OK(qm_discover_file_resident("/nonexistent-qmesh-file", &frac, &st));
    CHECK(frac == 0.375);
    const char *badv[] = {"1.01", "-0.5", "half", "0.5x", "nan"};
    for (size_t i = 0; i < sizeof badv / sizeof badv[0]; ++i) {
        setenv("QM_INPUT_RESIDENT", badv[i], 1);
        CHECK(qm_discover_file_resident("/nonexistent-qmesh-file", &frac, &st) == QM_E_ARG);
        char want[160];
        snprintf(want, sizeof want, "QM_INPUT_RESIDENT: expected a fraction from 0 to 1 (got '%s')",
                 badv[i]);
        CHECK_STR(st.msg, want);
    }
    unsetenv("QM_INPUT_RESIDENT");
    CHECK_OK(qm_discover_file_resident("/nonexistent-qmesh-file", &frac, &st));
    CHECK(frac == 0);
    char rpath[600];
    snprintf(rpath, sizeof rpath, "%s/resident.bin", g_dir);
    FILE *rf = fopen(rpath, "wb");
    CHECK(rf != NULL);
    if (rf) {
        static char block[1 << 16];
        for (int i = 0; i < 16; ++i)
            fwrite(block, 1, sizeof block, rf);
        fclose(rf);
        CHECK_OK(qm_discover_file_resident(rpath, &frac, &st));
        CHECK(frac >= 0 && frac <= 1);
        unlink(rpath);
    }
}

/* The copy and launch probe's figures (cuda_discover.c measures them on a CUDA machine): each
 * GPU's host link takes the measured pinned H2D (NUMA -> GPU) and D2H (GPU -> NUMA) rates, per
 * direction, defaults.launch the slowest GPU's round trip, defaults.efficiency.hbm the device copy
 * rate over the computed HBM bandwidth, sources lines say so; unmeasured (0) figures keep the
 * PCIe line rate, the 10 us default and an efficiency of 1. */
static void test_probe(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    qm_status st;
    qm_status_clear(&st);
    one_gpu_facts(f);
    f->gpus[0].h2d_bw_bytes_per_s = 50e9;
    f->gpus[0].d2h_bw_bytes_per_s = 48e9;
    f->gpus[0].launch_s = 12e-6;
    f->page_lock_s = 2.5e-3;
    f->page_lock_bw_bytes_per_s = 12e9;
    f->staging_setup_s = 0.75e-3;
    f->staging_open_s = 1.25e-3;
    f->state_alloc_bw_bytes_per_s = 5.5e12;
    f->big_state_alloc_s = 0.9e-3;
    f->piece_roots_s = 85e-6;
    f->piece_roots_blocks = 16384;
    f->host_piece_s = 9e-9;
    f->host_coeff_s = 15.5e-9;
    f->gpus[0].hbm_copy_bw_bytes_per_s = 0.75 * f->gpus[0].hbm_bw_bytes_per_s;
    f->sources |= QM_DISCOVER_SRC_PROBE;
    qm_topology *t = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    char *text = NULL;
    qm_topology *back = t ? round_trip(t, &text) : NULL;
    if (back) {
        CHECK(strstr(text, "  - {a: n0.numa0, b: n0.g0, kind: pcie, bandwidth: {a_to_b: 50 GB/s, "
                           "b_to_a: 48 GB/s}}\n") != NULL);
        CHECK(strstr(text, "  launch: 12 us\n  page_lock: {buffer: 2.5 ms, rate: 12 GB/s}\n"
                           "  staging_setup: 750 us\n  state_alloc: 5.5 TB/s\n  staging_open: 1.25 ms\n  piece_roots: 85 us\n"
                           "  host_batch: {pieces: 9 ns, coefficients: 15.5 ns}\n") != NULL);
        CHECK(strstr(text, "measured: defaults.host_batch = the median of 3 runs of an encode's "
                           "host work for 65536 states of 10 qubits, per state: pieces = "
                           "local_norm's piece sums, coefficients = norm_allreduce's merge and 1 / "
                           "sqrt (the encode's own functions, on freshly allocated arrays)") != NULL);
        CHECK(fabs(back->host_piece_s - 9e-9) <= 1e-24 && fabs(back->host_coeff_s - 15.5e-9) <= 1e-24);
        CHECK(strstr(text, "measured: defaults.staging_setup = on the first GPU, an encode's device "
                           "setup outside its reads: a 1 GiB state allocated (the first of 3, as an "
                           "encode's state is its process's first), then its block sums allocated "
                           "and (after the pipe's use) its staging closed (the device synchronized, "
                           "12 events and 2 streams destroyed: the median of 3)") != NULL);
        CHECK(strstr(text, "measured: defaults.staging_open = the median of 3 times, on the first "
                           "GPU, of opening an encode's staging (2 streams, 12 events, 2 x 32 MiB "
                           "on the device) after its state's allocation and copying 2 chunks of 32 "
                           "MiB into it from page-locked memory, synchronized, less the copies at "
                           "the measured host link") != NULL);
        CHECK(strstr(text, "measured: defaults.piece_roots = on the first GPU, local_norm's roots "
                           "as a one-shot encode makes them, its kernel loaded before: the "
                           "tree_combine op over a 2^28 state's 16384 block sums, the root copied "
                           "to plain host memory (the process's first such copy), the stream "
                           "synchronized and destroyed, the sums' buffer given back") != NULL);
        CHECK(back->staging_setup_s == 0.75e-3 && back->staging_open_s == 1.25e-3);
        CHECK(back->state_alloc_bw_bytes_per_s == 5.5e12);
        CHECK(strstr(text, "measured: defaults.state_alloc = on the first GPU, the bytes between a "
                           "4 GiB state's first allocation (made before the staging probe and kept "
                           "through it) and the 1 GiB one's, over the time between them") != NULL);
        CHECK(fabs(back->piece_roots_s - 85e-6) <= 1e-20);
        CHECK(strstr(text, "measured: each GPU's host link = pinned cudaMemcpyAsync, 8 copies of "
                           "64 MiB each way (after one untimed), per direction; defaults.launch = "
                           "the slowest GPU's mean of 200 round trips of a 4-byte cudaMemsetAsync "
                           "and cudaStreamSynchronize; defaults.page_lock = the line through the "
                           "median times of making 2 MiB and 64 MiB page-locked (huge pages "
                           "touched first, as encode prepares them while CUDA starts; "
                           "cudaHostRegister)") != NULL);
        CHECK(back->page_lock_s == 2.5e-3 && back->page_lock_bw_bytes_per_s == 12e9);
        CHECK(back->launch_s == 12e-6);
        /* the device copy rate: 75% of the computed HBM bandwidth */
        CHECK(strstr(text, "sys: 1, net: 1, hbm: 0.75}") != NULL);
        CHECK(back->hbm_efficiency == 0.75);
        CHECK(strstr(text, "measured: defaults.efficiency.hbm = the lowest over GPUs of the device "
                           "copy rate (cudaMemcpyAsync device to device, 8 copies of 512 MiB after "
                           "one untimed, bytes read + written / time) over the HBM bandwidth "
                           "computed from the clock") != NULL);
        CHECK(back->links[0].bw_ab_bytes_per_s == 50e9 && back->links[0].bw_ba_bytes_per_s == 48e9);
    }
    free(text);
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    /* not measured: the line rate both ways, the default launch */
    one_gpu_facts(f);
    CHECK_OK(qm_discover_build(f, &t, &st));
    if (t) {
        CHECK(t->launch_s == 10e-6 && t->page_lock_s == 3.8e-3 && t->page_lock_bw_bytes_per_s == 16e9);
        /* not measured: the built-in figures */
        CHECK(t->staging_setup_s == 0.7e-3 && t->staging_open_s == 1e-3 && t->piece_roots_s == 60e-6);
        CHECK(t->state_alloc_bw_bytes_per_s == 6e12);
        CHECK(t->host_piece_s == 1.5e-9 && t->host_coeff_s == 6e-9);
        for (int i = 0; i < t->n_sources; ++i)
            CHECK(strstr(t->sources[i], "staging_setup") == NULL &&
                  strstr(t->sources[i], "staging_open") == NULL &&
                  strstr(t->sources[i], "state_alloc") == NULL &&
                  strstr(t->sources[i], "piece_roots") == NULL &&
                  strstr(t->sources[i], "host_batch") == NULL);
        CHECK(t->hbm_efficiency == 1.0); /* no device copy measured: as stated */
        for (int i = 0; i < t->n_sources; ++i)
            CHECK(strstr(t->sources[i], "efficiency.hbm") == NULL);
        CHECK(t->links[0].bw_ab_bytes_per_s == t->links[0].bw_ba_bytes_per_s &&
              t->links[0].bw_ab_bytes_per_s == qm_discover_pcie_bw(16.0, 16));
    }
    qm_topology_destroy(t);
    free(f);
}

/* The host probe behind defaults.host_batch (qm_materialize_host_probe): an encode's host work
 * per state, which on any machine is well above 0 and below 10 us a state; its argument errors. */
static void test_host_probe(void)
{
    qm_status st;
    qm_status_clear(&st);
    double pieces = -1, coeffs = -1;
    CHECK_OK(qm_materialize_host_probe(10, 4096, &pieces, &coeffs, &st));
    printf("host probe: %.2f ns of piece sums, %.2f ns of merge and coefficient per state\n",
           pieces * 1e9, coeffs * 1e9);
    CHECK(pieces > 0 && pieces < 1e-5 && coeffs > 0 && coeffs < 1e-5);
    CHECK(qm_materialize_host_probe(10, 0, &pieces, &coeffs, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "host probe: needs at least 1 state of 1 to 62 qubits (got 0 of 10)");
    CHECK(qm_materialize_host_probe(0, 8, &pieces, &coeffs, &st) == QM_E_ARG);
}

/* The roots probe behind defaults.piece_roots (qm_materialize_roots_probe) on the simulator: the
 * encode's own local_norm steps over one state's block sums (2^16 slots: 4 sums of 2^14), a time
 * above 0 and below a second; its argument errors and a device too small for the sums. On a GPU
 * topo dump runs it on the CUDA backend (tests/test_discover_cuda.c). */
static void test_roots_probe(void)
{
    qm_status st;
    qm_status_clear(&st);
    qm_hal *hal = NULL;
    CHECK_OK(fixture_mesh(1, 1 << 20, false, QM_SIM_MATERIALIZED, &hal, &st));
    double secs = -1, steady = -1;
    uint64_t blocks = 0;
    CHECK_OK(qm_materialize_roots_probe(hal, 0, 16, 3, &secs, &steady, &blocks, &st));
    printf("roots probe (simulator): %.2f us the first time, %.2f us after, for %llu block sums\n",
           secs * 1e6, steady * 1e6, (unsigned long long)blocks);
    CHECK(secs > 0 && secs < 1.0 && steady > 0 && steady < 1.0 && blocks == 4);
    CHECK(qm_materialize_roots_probe(hal, 0, 16, 0, &secs, NULL, NULL, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "roots probe: needs a backend, one of its devices, 1 to 63 runs and a state "
                      "of 14 to 40 qubits (got device 0, 0 runs, 16 qubits)");
    CHECK(qm_materialize_roots_probe(hal, 1, 16, 3, &secs, NULL, NULL, &st) == QM_E_ARG);
    CHECK(qm_materialize_roots_probe(hal, 0, 13, 3, &secs, NULL, NULL, &st) == QM_E_ARG);
    /* a state whose block sums (2^17 + 1 doubles) do not fit the 1 MiB device: the allocation's
     * error, prefixed */
    CHECK(qm_materialize_roots_probe(hal, 0, 31, 1, &secs, NULL, NULL, &st) != QM_OK);
    CHECK(strncmp(st.msg, "roots probe: ", 13) == 0);
    qm_hal_destroy(hal);
}

/* Eight GPUs on an NVSwitch (HGX): one logical switch, 18 links each; two models -> two types. */
static void test_nvswitch(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    qm_status st;
    qm_status_clear(&st);
    hand_facts(f);
    f->n_gpus = 8;
    memset(f->nvlinks, 0, sizeof f->nvlinks);
    for (int i = 0; i < 8; ++i) {
        qm_discover_gpu *g = &f->gpus[i];
        *g = f->gpus[0];
        g->free_bytes = 0;
        g->numa = i / 4;
        g->link_cur_gts = 32.0;
        g->link_cur_width = 16;
        g->nvswitch_links = 18;
        snprintf(g->bus_id, sizeof g->bus_id, "0000:%02x:00.0", 0x10 + i);
        for (int j = 0; j < 8; ++j)
            f->peer[i][j] = i != j;
    }
    f->gpus[7].sm_count = 114; /* another part with the same name: a second type */
    f->n_numa = 2;
    f->numa_ids[0] = 0;
    f->numa_ids[1] = 1;
    qm_topology *t = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    qm_topology *back = t ? round_trip(t, NULL) : NULL;
    if (back) {
        check_same(t, back);
        int nvs = node_of(back, "n0.nvs");
        CHECK(nvs >= 0 && back->nodes[nvs].kind == QM_NODE_NVSWITCH);
        CHECK(back->n_links == 8 + 8 + 1);
        const qm_link *l = link_of(back, "n0.g5", "n0.nvs");
        CHECK(l && l->cls == QM_LINK_NVLINK && l->bw_ab_bytes_per_s == 450e9);
        CHECK(back->n_device_types == 2);
        CHECK_STR(back->device_types[1].name, "nvidia-h200-2");
        CHECK(back->device_types[1].sm_count == 114);
        CHECK(strstr(back->description, "7 x NVIDIA H200, 1 x NVIDIA H200"));
        CHECK(strstr(back->description, "0 GPU pairs, 8 GPUs on NVSwitch"));
        qm_topo_graph *g = NULL;
        CHECK_OK(qm_topo_graph_create(back, &g, &st));
        qm_topo_path p;
        if (g) {
            CHECK_OK(qm_topo_graph_path(g, node_of(back, "n0.g0"), node_of(back, "n0.g7"), &p, &st));
            CHECK(p.found && p.cls == QM_LINK_NVLINK && p.bw_bytes_per_s == 450e9 && p.hops == 2);
        }
        qm_topo_graph_destroy(g);
    }
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    free(f);
}

static void test_build_errors(void)
{
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return;
    qm_status st;
    qm_status_clear(&st);
    qm_topology *t = (qm_topology *)&t; /* must come back NULL */
    hand_facts(f);
    f->gpus[0].link_cur_gts = f->gpus[1].link_cur_gts = 32.0;
    f->gpus[0].link_cur_width = f->gpus[1].link_cur_width = 16;
    CHECK(qm_discover_build(NULL, &t, &st) == QM_E_ARG && t == NULL);
    CHECK(qm_discover_build(f, NULL, &st) == QM_E_ARG);
    f->n_gpus = 0;
    t = (qm_topology *)&t;
    CHECK(qm_discover_build(f, &t, &st) == QM_E_ARG && t == NULL);
    CHECK_ERR(st, QM_E_ARG, "the facts have 0 GPUs (need 1 to 64)");
    f->n_gpus = 2;
    f->gpus[1].link_cur_width = 0;
    CHECK(qm_discover_build(f, &t, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "GPU 1 (NVIDIA H200, 0000:31:00.0) has no PCIe link speed and width");
    f->gpus[1].link_cur_width = 16;
    f->gpus[1].free_bytes = H200_BYTES + 1;
    CHECK(qm_discover_build(f, &t, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "GPU 1 (NVIDIA H200) has more free memory than memory");
    f->gpus[1].free_bytes = 0;
    f->gpus[0].hbm_bw_bytes_per_s = 0;
    CHECK(qm_discover_build(f, &t, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "GPU 0 (NVIDIA H200, 0000:17:00.0) has no memory size or HBM bandwidth");
    f->gpus[0].hbm_bw_bytes_per_s = H200_HBM;
    f->n_numa = 2;
    f->numa_ids[0] = 1;
    f->numa_ids[1] = 0;
    CHECK(qm_discover_build(f, &t, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "NUMA node numbers must be ascending");
    free(f);
}

/* ---- the CLI ----------------------------------------------------------------------------------- */

static int run(const char *qmesh, const char *args, char *err, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s topo dump %s 2>&1 >/dev/null", qmesh, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(err, 1, cap - 1, p);
    err[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_cli(const char *qmesh)
{
    char err[4096], args[1200], path[512];
    setenv("QM_STORAGE_RATES", "7 GB/s,1.5 GB/s", 1); /* a GPU machine's dump: deterministic */
    snprintf(path, sizeof path, "%s/dump.yaml", g_dir);
    snprintf(args, sizeof args, "--out %s", path);
    CHECK(run(qmesh, args, err, sizeof err) == 0);
    bool gpu = qm_cuda_device_count() > 0;
    if (gpu)
        CHECK(strstr(err, "qmesh: dumping this machine as discovered: 'discovered-") != NULL);
    else
        CHECK(strstr(err, "qmesh: no CUDA device: dumping the built-in simulated mesh") != NULL);
    CHECK(strstr(err, "qmesh: wrote ") != NULL);
    qm_topology *t = NULL;
    qm_diags d;
    qm_diags_init(&d);
    qm_status st;
    qm_status_clear(&st);
    CHECK_OK(qm_scenario_load_file(path, &t, &d, &st));
    CHECK(d.n == 0);
    if (t) {
        CHECK(t->n_gpus >= 1);
        if (gpu) {
            CHECK(strncmp(t->name, "discovered-", 11) == 0);
            CHECK(t->n_gpus == qm_cuda_device_count());
            CHECK(t->hosts[0].storage_read_bw_bytes_per_s == 7e9 &&
                  t->hosts[0].storage_write_bw_bytes_per_s == 1.5e9);
            CHECK(strstr(err, "qmesh: storage read 7 GB/s, write 1.5 GB/s (from QM_STORAGE_RATES "
                              "(not measured))\n") != NULL);
        }
    }
    qm_topology_destroy(t);
    qm_diags_fini(&d);
    /* no temporary file left next to it */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(tmp, F_OK) != 0);

    CHECK(run(qmesh, "--bogus", err, sizeof err) == 2);
    CHECK(strstr(err, "error[E-ARG]: topo dump: unknown option '--bogus'") != NULL);
    CHECK(run(qmesh, "a.yaml b.yaml", err, sizeof err) == 2);
    CHECK(strstr(err, "one file at a time (extra 'b.yaml')") != NULL);
    CHECK(run(qmesh, "--out", err, sizeof err) == 2);
    CHECK(strstr(err, "error[E-ARG]: topo dump: option --out needs a value (FILE); run 'qmesh topo "
                      "dump --help'\n") != NULL);
    CHECK(run(qmesh, "--out /nonexistent-dir-qmesh/x.yaml", err, sizeof err) == 1);
    CHECK(strstr(err, "error[E-IO]") != NULL && strstr(err, "/nonexistent-dir-qmesh/x.yaml"));
    /* a named file is dumped as before (no discovery), to --out as well */
    snprintf(args, sizeof args, "%s --out %s", path, path);
    CHECK(run(qmesh, args, err, sizeof err) == 0);
    CHECK(strstr(err, "dumping") == NULL && strstr(err, "qmesh: wrote ") != NULL);
    CHECK(run(qmesh, "/nonexistent-dir-qmesh/none.yaml", err, sizeof err) == 1);
    CHECK(strstr(err, "error[E-IO]") != NULL);
    /* the storage flags: this machine only */
    snprintf(args, sizeof args, "%s --storage-bytes 8MiB", path);
    CHECK(run(qmesh, args, err, sizeof err) == 2);
    CHECK(strstr(err, "error[E-ARG]: topo dump: --storage-bytes measures this machine's storage; "
                      "a FILE is dumped as written; run 'qmesh topo dump --help'\n") != NULL);
    CHECK(run(qmesh, "--storage-bytes lots", err, sizeof err) == 1);
    CHECK(strstr(err, "error[E-") != NULL && strstr(err, "topo dump --storage-bytes") != NULL);
    CHECK(run(qmesh, "--no-measure-storage", err, sizeof err) == 0);
    if (!gpu)
        CHECK(strstr(err, "dumping the built-in simulated mesh 'builtin-4xh100-sxm' (no storage is "
                          "measured for it)\n") != NULL);
    unsetenv("QM_STORAGE_RATES");
}

int main(int argc, char **argv)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_test_discover.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    make_tree();
    test_figures();
    test_readers();
    test_build_round_trip();
    test_single_and_no_nvml();
    test_nvswitch();
    test_build_errors();
    test_storage();
    test_probe();
    test_host_probe();
    test_roots_probe();
    if (argc > 1)
        test_cli(argv[1]);
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return qm_test_end("test_discover");
}
