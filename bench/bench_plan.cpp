// bench_plan.cpp — what-if speed: loading, graphing and planning generated clusters
// (scenarios/gen/gen_big.py writes them; set QM_BIG_SCENARIO to replace the 1024-host x 8-GPU one).
// Targets (issues 3, 4 and 18): load under 1 s, plan (mesh + plan with frontier and estimates) under
// 100 ms at 8192 devices, on the 2-core development machine, and linear in the devices, also for
// one host of 1024 to 8192 devices (BM_PlanShape: hosts, GPUs per host, qubits).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
#include "plan.h"
#include "scenario_loader.h"
}

namespace {

std::string big_path()
{
    if (const char *p = std::getenv("QM_BIG_SCENARIO"))
        return p;
    static std::string path;
    if (path.empty()) {
        path = "/tmp/qmesh-bench-big-1024x8.yaml";
        std::string cmd = std::string("python3 ") + QM_SOURCE_DIR + "/scenarios/gen/gen_big.py " + path;
        if (std::system(cmd.c_str()) != 0) {
            std::fprintf(stderr, "bench_plan: could not generate %s\n", path.c_str());
            std::exit(1);
        }
    }
    return path;
}

// A generated hosts x gpus scenario, written once per shape into /tmp.
std::string shape_path(int hosts, int gpus)
{
    if (hosts == 1024 && gpus == 8)
        return big_path();
    std::string path = "/tmp/qmesh-bench-big-" + std::to_string(hosts) + "x" + std::to_string(gpus) + ".yaml";
    std::string cmd = std::string("test -s ") + path + " || python3 " + QM_SOURCE_DIR +
                      "/scenarios/gen/gen_big.py " + path + " --hosts " + std::to_string(hosts) +
                      " --gpus-per-host " + std::to_string(gpus);
    if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "bench_plan: could not generate %s\n", path.c_str());
        std::exit(1);
    }
    return path;
}

qm_topology *load_or_die(const std::string &path)
{
    qm_status st;
    qm_topology *t = nullptr;
    if (qm_scenario_load_file(path.c_str(), &t, nullptr, &st) != QM_OK) {
        std::fprintf(stderr, "bench_plan: %s\n", st.msg);
        std::exit(1);
    }
    return t;
}

void BM_LoadScenario_1024x8(benchmark::State &state)
{
    const std::string path = big_path();
    for (auto _ : state) {
        qm_topology *t = load_or_die(path);
        benchmark::DoNotOptimize(t);
        qm_topology_destroy(t);
    }
}

void BM_TopologyGraph_1024x8(benchmark::State &state)
{
    qm_topology *t = load_or_die(big_path());
    for (auto _ : state) {
        qm_status st;
        qm_topo_graph *g = nullptr;
        if (qm_topo_graph_create(t, &g, &st) != QM_OK)
            state.SkipWithError(st.msg);
        qm_topo_graph_destroy(g);
    }
    qm_topology_destroy(t);
}

// The planning the CLI does for `qmesh plan --qubits N`: mesh (ranks, affinity order) and plan
// (layout for every auto candidate, feasibility, gather, frontier, estimates).
void BM_Plan_1024x8(benchmark::State &state)
{
    qm_topology *t = load_or_die(big_path());
    qm_status st;
    qm_topo_graph *g = nullptr;
    if (qm_topo_graph_create(t, &g, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        return;
    }
    qm_request r;
    qm_request_init(&r);
    r.qubits = (unsigned)state.range(0);
    bool feasible = false;
    for (auto _ : state) {
        qm_mesh *m = nullptr;
        qm_plan *p = nullptr;
        if (qm_mesh_create(t, g, 0, &m, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        qm_plan_create(m, &r, &p, &st);
        feasible = p && p->feasible;
        qm_plan_destroy(p);
        qm_mesh_destroy(m);
    }
    state.counters["feasible"] = feasible ? 1 : 0;
    qm_topo_graph_destroy(g);
    qm_topology_destroy(t);
}

void BM_LoadShape(benchmark::State &state)
{
    const std::string path = shape_path((int)state.range(0), (int)state.range(1));
    for (auto _ : state) {
        qm_topology *t = load_or_die(path);
        benchmark::DoNotOptimize(t);
        qm_topology_destroy(t);
    }
    state.counters["devices"] = (double)(state.range(0) * state.range(1));
}

// Graph, mesh and plan (as BM_Plan_1024x8) for a shape: hosts, GPUs per host, qubits.
void BM_PlanShape(benchmark::State &state)
{
    qm_topology *t = load_or_die(shape_path((int)state.range(0), (int)state.range(1)));
    qm_request r;
    qm_request_init(&r);
    r.qubits = (unsigned)state.range(2);
    bool feasible = false;
    for (auto _ : state) {
        qm_status st;
        qm_topo_graph *g = nullptr;
        qm_mesh *m = nullptr;
        qm_plan *p = nullptr;
        if (qm_topo_graph_create(t, &g, &st) != QM_OK || qm_mesh_create(t, g, 0, &m, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            qm_topo_graph_destroy(g);
            break;
        }
        qm_plan_create(m, &r, &p, &st);
        feasible = p && p->feasible;
        qm_plan_destroy(p);
        qm_mesh_destroy(m);
        qm_topo_graph_destroy(g);
    }
    state.counters["feasible"] = feasible ? 1 : 0;
    state.counters["devices"] = (double)(state.range(0) * state.range(1));
    qm_topology_destroy(t);
}

} // namespace

BENCHMARK(BM_LoadScenario_1024x8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TopologyGraph_1024x8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Plan_1024x8)->Arg(46)->Arg(47)->Arg(30)->Unit(benchmark::kMillisecond)->Iterations(5);
// 1024, 8192, 16384, 32768 devices of 8-GPU hosts; one host of 1024, 2048, 8192 devices.
// Qubits: the largest complex64 state equal fits (33 + log2 devices).
BENCHMARK(BM_LoadShape)->Args({128, 8})->Args({1024, 8})->Args({2048, 8})->Args({4096, 8})
    ->Args({1, 1024})->Args({1, 2048})->Args({1, 8192})->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_PlanShape)->Args({128, 8, 43})->Args({1024, 8, 46})->Args({2048, 8, 47})
    ->Args({4096, 8, 48})->Args({1, 1024, 43})->Args({1, 2048, 44})->Args({1, 8192, 46})
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_MAIN();
