/* bench_api_call.c — the C API's per-call cost of one small encode, for bench/bench_python.py to
 * compare qmesh.encode against, two ways: (1) a fresh context per call (qm_context_create on the
 * built-in scenario opened once, plan check, qm_context_open on the simulator, qm_context_encode of
 * ROWS x FEATURES float64 values, qm_state_read of every amplitude, destroy); (2) one context
 * planned and opened once, then per call qm_context_encode + qm_state_read + qm_state_destroy —
 * what qmesh.encode does when its context cache has the shape.
 *
 * Usage: bench_api_call [CALLS [ROWS [FEATURES]]] (defaults 20000 4 8). Prints the median of 7
 * repeats in microseconds per call: "c_api_us_per_call <median> (min <min>)", then
 * "c_api_kept_us_per_call <median> (min <min>)".
 */
#define _POSIX_C_SOURCE 200809L
#include "qmesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const long calls = argc > 1 ? atol(argv[1]) : 20000;
    const unsigned long long rows = argc > 2 ? strtoull(argv[2], NULL, 10) : 4;
    const unsigned long long features = argc > 3 ? strtoull(argv[3], NULL, 10) : 8;
    unsigned qubits = 1;
    while ((1ull << qubits) < features)
        qubits++;
    double *x = malloc(sizeof(double) * rows * features);
    double *out = malloc(2 * sizeof(double) * rows * (1ull << qubits));
    for (unsigned long long i = 0; i < rows * features; ++i)
        x[i] = (double)(i % 7) + 1.0;
    qm_status st;
    qm_scenario *sc = NULL;
    if (!x || !out || qm_scenario_open(NULL, &sc, &st) != QM_OK)
        return 1;
    qm_request r;
    qm_request_init(&r);
    r.qubits = qubits;
    r.dtype = QM_DTYPE_COMPLEX128;
    r.batch = rows;
    r.features = features;
    const qm_host_data in = {QM_DTYPE_FLOAT64, x, rows, features};
    double per[7];
    for (int rep = 0; rep < 7; ++rep) {
        const double t0 = now_s();
        for (long i = 0; i < calls; ++i) {
            qm_context *ctx = NULL;
            qm_state *s = NULL;
            qm_plan_info info;
            if (qm_context_create(sc, &r, &ctx, &st) != QM_OK ||
                qm_context_plan_info(ctx, &info, &st) != QM_OK || !info.feasible ||
                qm_context_open(ctx, QM_BACKEND_SIM, &st) != QM_OK ||
                qm_context_encode(ctx, &in, &s, &st) != QM_OK ||
                qm_state_read(s, 0, rows << qubits, QM_DTYPE_COMPLEX128, out, &st) != QM_OK) {
                char line[1024];
                fprintf(stderr, "%s\n", qm_status_format(&st, line, sizeof line));
                return 1;
            }
            qm_state_destroy(s);
            qm_context_destroy(ctx);
        }
        per[rep] = (now_s() - t0) / (double)calls * 1e6;
    }
    qsort(per, 7, sizeof *per, cmp);
    printf("c_api_us_per_call %.3f (min %.3f)\n", per[3], per[0]);
    qm_context *kept = NULL;
    qm_plan_info kinfo;
    if (qm_context_create(sc, &r, &kept, &st) != QM_OK ||
        qm_context_plan_info(kept, &kinfo, &st) != QM_OK || !kinfo.feasible ||
        qm_context_open(kept, QM_BACKEND_SIM, &st) != QM_OK)
        return 1;
    for (int rep = 0; rep < 7; ++rep) {
        const double t0 = now_s();
        for (long i = 0; i < calls; ++i) {
            qm_state *s = NULL;
            if (qm_context_encode(kept, &in, &s, &st) != QM_OK ||
                qm_state_read(s, 0, rows << qubits, QM_DTYPE_COMPLEX128, out, &st) != QM_OK) {
                char line[1024];
                fprintf(stderr, "%s\n", qm_status_format(&st, line, sizeof line));
                return 1;
            }
            qm_state_destroy(s);
        }
        per[rep] = (now_s() - t0) / (double)calls * 1e6;
    }
    qsort(per, 7, sizeof *per, cmp);
    printf("c_api_kept_us_per_call %.3f (min %.3f)\n", per[3], per[0]);
    qm_context_destroy(kept);
    qm_scenario_destroy(sc);
    free(x);
    free(out);
    return 0;
}
