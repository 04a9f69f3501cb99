/* test_plan_hostmem.c — host memory in feasibility (issue 17 item 8; docs/planner.md "Host memory").
 *
 * On the materialized simulator every shard lives in host memory: per scenario host, its devices'
 * planned bytes + the host staging (as much again as the device staging) + the read-back chunk
 * (rank 0's host) must fit in the host's `memory`, and in one process their sum in this machine's
 * MemAvailable (injected here: no check depends on the real machine). Checked: the exact bytes of
 * the accounting, the exact E-CAPACITY lines (scenario host, injected MemAvailable), a host without
 * `memory:` not checked, the CUDA budget (zero) not affected, the frontier and `plan --max`
 * counting host memory, the MemAvailable reader on a fake /proc (and QM_MEMAVAILABLE), and the
 * public API's qm_context_open on the simulator.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp */
#include "discover.h"
#include "plan_fixtures.h"
#include "qmesh.h"

#include <string.h>
#include <unistd.h>

/* One host of `host_memory` (NULL: no memory: key), two 80 GiB GPUs behind PCIe. */
static const char *box(char *buf, size_t cap, const char *host_memory)
{
    char mem[64] = "";
    if (host_memory)
        snprintf(mem, sizeof mem, "    memory: %s\n", host_memory);
    snprintf(buf, cap,
             "schema: qmesh/1\nname: hostmem\nsources: [test]\n"
             "hosts:\n  - id: n0\n%s    numa: [{id: 0}]\n    devices:\n"
             "      - {id: n0.g0, memory: 80 GiB, hbm_bandwidth: 2 TB/s, numa: 0}\n"
             "      - {id: n0.g1, memory: 80 GiB, hbm_bandwidth: 2 TB/s, numa: 0}\n"
             "links:\n"
             "  - {a: n0.numa0, b: n0.g0, kind: pcie, bandwidth: 50 GB/s}\n"
             "  - {a: n0.numa0, b: n0.g1, kind: pcie, bandwidth: 50 GB/s}\n"
             "  - {a: n0.g0, b: n0.g1, kind: nvlink, bandwidth: 100 GB/s}\n",
             mem);
    return buf;
}

/* The box of `host_memory` loaded into f, its pipeline planning with budget b. */
static bool load_box(fixture *f, const char *host_memory, qm_host_budget b)
{
    char yaml[2048];
    const bool ok = fixture_load(f, box(yaml, sizeof yaml, host_memory), 0);
    f->pl.host_budget = b;
    return ok;
}

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

/* 28 qubits complex128 under equal: 2 shards of 2 GiB, each with 1 GiB of float64 input, so 64 MiB
 * of device staging each; the host holds both devices (2 x (2 GiB + 64 MiB)), the host staging
 * (2 x 64 MiB) and the read-back chunk (2^20 complex128 = 16 MiB). */
static void accounting_exact(void)
{
    fixture f;
    CHECK(load_box(&f, "8 GiB", (qm_host_budget){.sim = true}));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 28, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->feasible && p->host_checked);
    if (p) {
        CHECK_EQ_U64(p->n_hosts, 1);
        CHECK_EQ_U64(p->hosts[0].memory_bytes, 8 * GIB);
        CHECK_EQ_U64(p->hosts[0].device_bytes, 2 * (2 * GIB + 64 * MIB));
        CHECK_EQ_U64(p->hosts[0].staging_bytes, 128 * MIB);
        CHECK_EQ_U64(p->hosts[0].output_bytes, 16 * MIB);
        CHECK_EQ_U64(p->hosts[0].planned_bytes, 4 * GIB + 128 * MIB + 128 * MIB + 16 * MIB);
        CHECK_EQ_U64(p->local_planned_bytes, 4580179968ull);
        /* the frontier counts host memory: 29 qubits (8 GiB + 272 MiB) do not fit in 8 GiB */
        CHECK_EQ_U64(p->max_qubits[1], 28);
        CHECK_EQ_U64(p->max_qubits[0], 29);
    }
    qm_plan_destroy(p);
    /* complex64 state: an 8 MiB read-back chunk */
    p = fixture_plan(&f, 20, QM_DTYPE_COMPLEX64, QM_POLICY_SINGLE, &rc, &st);
    CHECK(rc == QM_OK && p && p->host_checked);
    if (p) {
        /* one shard of 8 MiB, 4 MiB of float32 input: 4 MiB staging on the device and the host */
        CHECK_EQ_U64(p->hosts[0].device_bytes, 12 * MIB);
        CHECK_EQ_U64(p->hosts[0].staging_bytes, 4 * MIB);
        CHECK_EQ_U64(p->hosts[0].output_bytes, 8 * MIB);
        CHECK_EQ_U64(p->hosts[0].planned_bytes, 24 * MIB);
    }
    qm_plan_destroy(p);
    fixture_free(&f);
}

/* A scenario host too small for the state: E-CAPACITY before any allocation, the exact line with
 * the frontier's hint; the same request on the CUDA budget (zero) is feasible. */
static void scenario_host_too_small(void)
{
    fixture f;
    CHECK(load_box(&f, "8 GiB", (qm_host_budget){.sim = true}));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 29, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_E_CAPACITY && p && !p->feasible);
    CHECK_STR(st.msg, "feasibility: the simulated devices of host n0 need 8.12 GiB of host memory "
                      "(+ 128.00 MiB staging + 16.00 MiB output assembly) but n0 has 8.00 GiB; "
                      "largest state that fits is 28 qubits (complex128)");
    if (p)
        CHECK_EQ_U64(p->hosts[0].planned_bytes, 8 * GIB + 272 * MIB);
    qm_plan_destroy(p);
    /* auto: no policy fits the host, the hint is auto's frontier */
    p = fixture_plan(&f, 29, QM_DTYPE_COMPLEX128, QM_POLICY_AUTO, &rc, &st);
    CHECK(rc == QM_E_CAPACITY);
    CHECK_ERR(st, QM_E_CAPACITY, "but n0 has 8.00 GiB; largest state that fits is 28 qubits "
                                 "(complex128)");
    qm_plan_destroy(p);
    /* the hint works: 28 qubits fit */
    p = fixture_plan(&f, 28, QM_DTYPE_COMPLEX128, QM_POLICY_AUTO, &rc, &st);
    CHECK(rc == QM_OK && p && p->feasible);
    qm_plan_destroy(p);
    /* CUDA (and phantom, and `qmesh plan` without --backend sim): host RAM does not hold shards */
    f.pl.host_budget = (qm_host_budget){0};
    p = fixture_plan(&f, 29, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->feasible && !p->host_checked);
    if (p)
        CHECK_EQ_U64(p->max_qubits[1], 33); /* 2 x 80 GiB: 64 GiB + staging per device */
    qm_plan_destroy(p);
    fixture_free(&f);
}

/* MemAvailable (injected) below the plan: the line names this machine; a host without memory: is
 * not checked against the scenario, only against MemAvailable. */
static void injected_available(void)
{
    fixture f;
    CHECK(load_box(&f, NULL, (qm_host_budget){.sim = true, .available_bytes = 4 * GIB}));
    qm_status st;
    qm_code rc;
    qm_plan *p = fixture_plan(&f, 28, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_E_CAPACITY && p && !p->feasible);
    CHECK_STR(st.msg, "feasibility: the simulated devices of this process need 4.12 GiB of host "
                      "memory (+ 128.00 MiB staging + 16.00 MiB output assembly) but this machine "
                      "has 4.00 GiB available (MemAvailable); largest state that fits is 27 qubits "
                      "(complex128)");
    if (p) {
        CHECK_EQ_U64(p->hosts[0].memory_bytes, 0); /* no memory: key: not checked */
        CHECK_EQ_U64(p->local_planned_bytes, 4580179968ull);
    }
    qm_plan_destroy(p);
    /* without MemAvailable, a host without memory: takes any state the devices take */
    f.pl.host_budget = (qm_host_budget){.sim = true};
    p = fixture_plan(&f, 33, QM_DTYPE_COMPLEX128, QM_POLICY_EQUAL, &rc, &st);
    CHECK(rc == QM_OK && p && p->feasible && p->host_checked);
    qm_plan_destroy(p);
    /* plan --max on the same mesh: host memory counted when the budget is the simulator's */
    qm_request r;
    qm_request_init(&r);
    qm_plan_max m;
    f.m->host_budget = (qm_host_budget){.sim = true, .available_bytes = 4 * GIB};
    CHECK(qm_plan_max_query(f.m, &r, &m, &st) == QM_OK);
    CHECK_EQ_U64(m.value[1][QM_POLICY_EQUAL], 27);
    CHECK_EQ_U64(m.value[0][QM_POLICY_EQUAL], 28);
    CHECK_EQ_U64(m.value[1][QM_POLICY_REPLICATED], 26); /* two copies in one machine */
    f.m->host_budget = (qm_host_budget){0};
    CHECK(qm_plan_max_query(f.m, &r, &m, &st) == QM_OK);
    CHECK_EQ_U64(m.value[1][QM_POLICY_EQUAL], 33);
    /* the largest batch: 2^20-amplitude complex128 samples (16 MiB each, input 8 MiB each) */
    f.m->host_budget = (qm_host_budget){.sim = true, .available_bytes = 1 * GIB};
    qm_request b;
    qm_request_init(&b);
    b.qubits = 20;
    b.dtype = QM_DTYPE_COMPLEX128;
    b.features = (uint64_t)1 << 20;
    b.policy = QM_POLICY_WEIGHTED;
    /* B samples (B >= 16: at least 8 per device, so 64 MiB of staging on each device and as much
     * on the host): 16 B MiB of states + 128 MiB device staging + 128 MiB host staging + 16 MiB
     * read-back <= 1024 MiB: B <= 47 (exactly 1024 MiB) */
    const uint64_t B = qm_plan_max_batch(f.m, &b);
    CHECK_EQ_U64(B, 47);
    fixture_free(&f);
}

/* The MemAvailable reader on a fake /proc, and the QM_MEMAVAILABLE hook. */
static void mem_available_reader(void)
{
    char dir[] = "/tmp/qm_hostmem_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/meminfo", dir);
    const char *text = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\n"
                       "MemAvailable:    7770000 kB\nBuffers:          100 kB\n";
    qm_test_write_file(path, text, strlen(text));
    uint64_t v = 1;
    qm_status st;
    CHECK(qm_discover_mem_available(dir, &v, &st) == QM_OK);
    CHECK_EQ_U64(v, 7770000ull * 1024);
    const char *old = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\n";
    qm_test_write_file(path, old, strlen(old));
    CHECK(qm_discover_mem_available(dir, &v, &st) == QM_E_INPUT);
    char want[160];
    snprintf(want, sizeof want, "discover: %s has no 'MemAvailable: N kB' line", path);
    CHECK_STR(st.msg, want);
    unlink(path);
    rmdir(dir);
    setenv("QM_MEMAVAILABLE", "7.5 GiB", 1);
    CHECK(qm_host_mem_available_query(&v, &st) == QM_OK);
    CHECK_EQ_U64(v, 7.5 * GIB);
    setenv("QM_MEMAVAILABLE", "lots", 1);
    CHECK(qm_host_mem_available_query(&v, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "host memory: QM_MEMAVAILABLE must be a size above 0 such as '8 GiB' (got "
                      "'lots')");
    unsetenv("QM_MEMAVAILABLE");
}

/* The public API: qm_context_open on the simulator plans again with host memory counted. */
static void api_open(void)
{
    char yaml[2048];
    box(yaml, sizeof yaml, "8 GiB");
    qm_status st;
    qm_scenario *sc = NULL;
    CHECK(qm_scenario_parse(yaml, strlen(yaml), "hostmem.yaml", &sc, &st) == QM_OK);
    qm_request r;
    qm_request_init(&r);
    r.qubits = 29;
    r.dtype = QM_DTYPE_COMPLEX128;
    r.policy = QM_POLICY_EQUAL;
    qm_context *ctx = NULL;
    CHECK(qm_context_create(sc, &r, &ctx, &st) == QM_OK); /* device memory: fits */
    setenv("QM_MEMAVAILABLE", "1 TiB", 1);
    CHECK(qm_context_open(ctx, QM_BACKEND_SIM, &st) == QM_E_CAPACITY);
    CHECK_STR(st.msg, "layout: the plan is not feasible: feasibility: the simulated devices of "
                      "host n0 need 8.12 GiB of host memory (+ 128.00 MiB staging + 16.00 MiB "
                      "output assembly) but n0 has 8.00 GiB; largest state that fits is 28 qubits "
                      "(complex128)");
    qm_plan_info info;
    CHECK(qm_context_plan_info(ctx, &info, &st) == QM_OK && !info.feasible);
    qm_context_destroy(ctx);
    /* 2^10 amplitudes fit: the context opens on the simulator */
    r.qubits = 10;
    CHECK(qm_context_create(sc, &r, &ctx, &st) == QM_OK);
    CHECK(qm_context_open(ctx, QM_BACKEND_SIM, &st) == QM_OK);
    qm_context_destroy(ctx);
    unsetenv("QM_MEMAVAILABLE");
    qm_scenario_destroy(sc);
}

int main(void)
{
    accounting_exact();
    scenario_host_too_small();
    injected_available();
    mem_available_reader();
    api_open();
    return qm_test_end("test_plan_hostmem");
}
