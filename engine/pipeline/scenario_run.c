/* scenario_run.c — `qmesh scenario run`: plan every case of a scenario and check its expectations.
 *
 * In: a loaded topology with cases, each planned through the pipeline (pipeline.h). Out: one line per case on f — "ok", or one "MISS" line per
 * expectation that is not met, with the expected and the actual value — and the counts.
 * Must not: stop at the first miss (every case and every expectation is reported).
 */
#include "pipeline.h"
#include "plan_output.h"
#include "status_internal.h"

#include <math.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

typedef struct case_ctx {
    FILE *f;
    const qm_topology *t;
    const qm_case *c;
    int misses;
} case_ctx;

static void miss(case_ctx *x, const char *fmt, ...) QM_PRINTF(2, 3);
static void miss(case_ctx *x, const char *fmt, ...)
{
    va_list ap;
    fprintf(x->f, "%s:%d: case %s: MISS ", qm_topology_label(x->t), x->c->loc.line,
            x->c->id);
    va_start(ap, fmt);
    vfprintf(x->f, fmt, ap);
    va_end(ap);
    fputc('\n', x->f);
    x->misses++;
}

static void check_plan(case_ctx *x, const qm_mesh *mesh, const qm_plan *p, qm_code rc,
                       const qm_status *st)
{
    const qm_case_expect *e = &x->c->expect;
    const bool feasible = p && p->feasible;
    const qm_code code = p ? p->error.code : rc;
    char a[32], b[32];
    if (e->feasible != feasible)
        miss(x, "feasible: expected %s, got %s%s%s%s", e->feasible ? "true" : "false",
             feasible ? "true" : "false", feasible ? "" : " (", feasible ? "" : (p ? p->error.msg : st->msg),
             feasible ? "" : ")");
    if (e->has_error && e->error != code)
        miss(x, "error: expected %s, got %s (%s)", qm_code_name(e->error),
             code == QM_OK ? "none" : qm_code_name(code), p ? p->error.msg : st->msg);
    if (!p)
        return;
    if (e->has_shards && e->shards != p->n_shards)
        miss(x, "shards: expected %d, got %d", e->shards, p->n_shards);
    if (e->has_pages && e->pages != p->pages)
        miss(x, "pages: expected %llu, got %llu", (unsigned long long)e->pages,
             (unsigned long long)p->pages);
    if (e->has_shard_bytes)
        for (int i = 0; i < p->n_shards; ++i)
            if (p->shards[i].bytes != e->shard_bytes) {
                miss(x, "shard_bytes: expected %s, got %s for shard %d",
                     qm_format_bytes(e->shard_bytes, a, sizeof a),
                     qm_format_bytes(p->shards[i].bytes, b, sizeof b), i);
                break;
            }
    if (e->n_devices >= 0) {
        if (e->n_devices != p->n_shards)
            miss(x, "devices: expected %d devices, got %d shards", e->n_devices, p->n_shards);
        for (int i = 0; i < e->n_devices && i < p->n_shards; ++i)
            if (strcmp(e->devices[i], mesh->devices[p->shards[i].device].id) != 0) {
                miss(x, "devices: shard %d expected on %s, got %s", i, e->devices[i],
                     mesh->devices[p->shards[i].device].id);
                break;
            }
    }
    if (e->n_ranks >= 0) {
        if (e->n_ranks != p->n_shards)
            miss(x, "ranks: expected %d entries, got %d shards", e->n_ranks, p->n_shards);
        for (int i = 0; i < e->n_ranks && i < p->n_shards; ++i)
            if (e->ranks[i] != p->shards[i].rank) {
                miss(x, "ranks: shard %d expected on rank %d, got %d", i, e->ranks[i],
                     p->shards[i].rank);
                break;
            }
    }
    if (e->has_gather) {
        if (e->gather_feasible != p->gather.feasible)
            miss(x, "gather.feasible: expected %s, got %s (%s: %s)", e->gather_feasible ? "true" : "false",
                 p->gather.feasible ? "true" : "false", p->gather.target, p->gather.reason);
        if (e->gather_target[0] && strcmp(e->gather_target, p->gather.target) != 0)
            miss(x, "gather.target: expected %s, got %s", e->gather_target, p->gather.target);
    }
    if (e->has_max_qubits && (e->max_qubits_c64 != p->max_qubits[0] ||
                              e->max_qubits_c128 != p->max_qubits[1]))
        miss(x, "max_qubits: expected complex64 %u / complex128 %u, got %u / %u",
             e->max_qubits_c64, e->max_qubits_c128, p->max_qubits[0], p->max_qubits[1]);
    if (e->has_min_headroom) {
        /* the smallest headroom as a sign and a magnitude (sizes are uint64_t: no signed
         * subtraction) */
        bool min_neg = false, seen = false;
        uint64_t min_mag = 0;
        for (int i = 0; i < p->n_shards; ++i) {
            const qm_plan_device *pd = &p->devices[p->shards[i].device];
            uint64_t m;
            const bool neg = qm_headroom_split(pd->usable_bytes, pd->planned_bytes, &m);
            if (!seen || (neg && (!min_neg || m > min_mag)) || (!neg && !min_neg && m < min_mag)) {
                min_neg = neg;
                min_mag = m;
                seen = true;
            }
        }
        if (seen && (min_neg || min_mag < e->min_headroom_bytes))
            miss(x, "min_headroom: expected at least %s, got %s%llu bytes",
                 qm_format_bytes(e->min_headroom_bytes, a, sizeof a), min_neg ? "-" : "",
                 (unsigned long long)min_mag);
    }
    for (int k = 0; k < QM_PHASE_COUNT_; ++k) {
        const qm_expect_estimate *ee = &e->estimates[k];
        if (!ee->set)
            continue;
        if (!p->has_estimates || !p->estimate_set[k]) {
            miss(x, "estimates.%s: expected %s, got none", qm_phase_name((qm_phase)k),
                 qm_format_seconds(ee->value_s, a, sizeof a));
            continue;
        }
        double got = p->estimates_s[k];
        if (!(fabs(got - ee->value_s) <= ee->rel_tol * ee->value_s))
            miss(x, "estimates.%s (%s): expected %s within %.0f%%, got %s (%+.1f%%)",
                 qm_phase_name((qm_phase)k), ee->kind == QM_ESTIMATE_MODEL ? "model" : "reality",
                 qm_format_seconds(ee->value_s, a, sizeof a), ee->rel_tol * 100,
                 qm_format_seconds(got, b, sizeof b), (got / ee->value_s - 1) * 100);
    }
}

qm_code qm_scenario_run_cases(const qm_topology *t, FILE *f, bool print_ok, int *n_cases,
                              int *n_missed, qm_status *st)
{
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    qm_pipeline_use(&pl, t);
    qm_code rc = qm_pipeline_graph(&pl, st);
    *n_cases = *n_missed = 0;
    for (int i = 0; rc == QM_OK && i < t->n_cases; ++i) {
        const qm_case *c = &t->cases[i];
        case_ctx x = {.f = f, .t = t, .c = c};
        qm_status cst;
        qm_status_clear(&cst);
        const qm_code prc = qm_pipeline_plan(&pl, &c->request, &cst);
        if (prc == QM_E_NOMEM || prc == QM_E_INTERNAL) {
            if (st)
                *st = cst;
            rc = prc;
            break;
        }
        check_plan(&x, pl.mesh, pl.plan, prc, &cst);
        (*n_cases)++;
        if (x.misses)
            (*n_missed)++;
        else if (print_ok)
            fprintf(f, "%s:%d: case %s: ok\n", qm_topology_label(t), c->loc.line, c->id);
    }
    qm_pipeline_fini(&pl);
    return rc;
}
