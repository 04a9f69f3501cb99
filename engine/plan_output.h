/* plan_output.h — rendering plans (plan_json.c) and checking scenario cases (scenario_run.c). */
#ifndef QM_PLAN_OUTPUT_H
#define QM_PLAN_OUTPUT_H

#include "plan.h"

#include <stdio.h>

struct json_t;

/* The plan as the JSON object of DESIGN.md section 7 (caller owns the reference). */
qm_code qm_plan_to_json(const qm_plan *p, const qm_mesh *mesh, const char *scenario,
                        struct json_t **out, qm_status *st);
/* The plan as a readable table. */
void qm_plan_print(const qm_plan *p, const qm_mesh *mesh, const char *scenario, FILE *f);

/* Run every case of a loaded topology: plan each request and compare each expectation. Prints
 * one line per case ("case ID: ok", only with print_ok, or "case ID: MISS <what>: expected X,
 * got Y" per miss) to f.
 * *n_cases and *n_missed count cases; returns QM_OK unless planning itself failed (E-NOMEM...). */
qm_code qm_scenario_run_cases(const qm_topology *t, FILE *f, bool print_ok, int *n_cases,
                              int *n_missed, qm_status *st);

#endif
