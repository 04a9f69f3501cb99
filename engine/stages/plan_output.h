/* plan_output.h — rendering plans (plan_json.c) and checking scenario cases (scenario_run.c). */
#ifndef QM_PLAN_OUTPUT_H
#define QM_PLAN_OUTPUT_H

#include "plan.h"

#include <stdbool.h>
#include <stdio.h>

struct json_t;

/* A byte or amplitude count as JSON: an integer when it fits jansson's json_int_t (signed 64-bit),
 * from 2^63 on a real, the nearest double (relative error at most 2^-53). The planner accepts
 * states up to 2^64 - 1 bytes (validate.c: 2^60 complex64 amplitudes, 2^59 complex128), and
 * scenarios may declare up to 16 EiB - 1 per device, so such counts do occur (docs/planner.md). */
struct json_t *qm_json_count(uint64_t v);
/* The headroom usable - planned (negative when the plan overflows the device) as JSON: an integer
 * when it fits json_int_t, else a real. */
struct json_t *qm_json_headroom(uint64_t usable, uint64_t planned);
/* usable - planned as a sign (the return value: negative) and a magnitude, exact for any two
 * 64-bit counts: no signed arithmetic. */
static inline bool qm_headroom_split(uint64_t usable, uint64_t planned, uint64_t *magnitude)
{
    *magnitude = usable >= planned ? usable - planned : planned - usable;
    return usable < planned;
}

/* The plan as the JSON object `qmesh plan --json` prints, fields in docs/cli.md (caller owns
 * the reference). */
qm_code qm_plan_to_json(const qm_plan *p, const qm_mesh *mesh, const char *scenario,
                        struct json_t **out, qm_status *st);
/* The plan as a readable table; t is the topology planned on (its title heads the table and its
 * name labels the estimates). The plan's error is not printed (the caller prints it once). */
void qm_plan_print(const qm_plan *p, const qm_mesh *mesh, const qm_topology *t, FILE *f);

/* `qmesh plan --max` as the plan object's `max` member (docs/cli.md: ranks, devices, unit,
 * features, qubits, and per dtype {policy: value or null, auto_policy}) and as a table titled as
 * the plan's (t: the topology planned on). */
qm_code qm_plan_max_to_json(const qm_plan_max *m, const qm_mesh *mesh, struct json_t **out,
                            qm_status *st);
void qm_plan_max_print(const qm_plan_max *m, const qm_mesh *mesh, const qm_topology *t, FILE *f);

/* The plan as a Graphviz picture (plan_dot.c): the scenario's graph by hosts, each device with
 * its shard and bytes, the links of the gather paths highlighted, the others light. E-IO when
 * writing fails, E-NOMEM. */
qm_code qm_plan_dot(const qm_plan *p, const qm_mesh *mesh, FILE *f, qm_status *st);

/* Run every case of a loaded topology: plan each request and compare each expectation. Prints
 * one line per case ("case ID: ok", only with print_ok, or "case ID: MISS <what>: expected X,
 * got Y" per miss) to f.
 * *n_cases and *n_missed count cases; returns QM_OK unless planning itself failed (E-NOMEM...). */
qm_code qm_scenario_run_cases(const qm_topology *t, FILE *f, bool print_ok, int *n_cases,
                              int *n_missed, qm_status *st);

#endif
