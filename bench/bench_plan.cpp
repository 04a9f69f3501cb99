// bench_plan.cpp — what-if speed: loading, graphing and planning a 1024-host x 8-GPU scenario
// (scenarios/gen/gen_big.py writes it; set QM_BIG_SCENARIO to use another file).
// Targets (issues 3 and 4): load under 1 s, plan (mesh + plan with frontier and estimates) under
// 100 ms, on the 2-core development machine.
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

} // namespace

BENCHMARK(BM_LoadScenario_1024x8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TopologyGraph_1024x8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Plan_1024x8)->Arg(46)->Arg(47)->Arg(30)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_MAIN();
