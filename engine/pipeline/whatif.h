/* whatif.h — `qmesh whatif`: one request planned on variants of a scenario (more or fewer hosts,
 * devices per host, device memory, failed devices), one result row per variant and dtype.
 *
 * In: a loaded topology, the lists of variations and the request. Out: rows (the first ones for
 * the unmodified scenario, then the cross product of the lists, hosts outermost, failed devices
 * innermost; per variant one row per dtype asked for). Each variant is a topology built in memory
 * (scenario_variant.h) and planned through the pipeline (pipeline.h); its maximum qubits come from
 * the plan's frontier (qm_plan_frontier).
 * Must not: print, generate YAML text, or change the source topology.
 */
#ifndef QM_WHATIF_H
#define QM_WHATIF_H

#include "plan.h"
#include "scenario_variant.h"

/* Upper bound on rows (variants x dtypes); E-ARG beyond it. */
#define QM_WHATIF_MAX_ROWS 1024

/* One set of devices failing together (the `+`-joined ids of one --without item). */
typedef struct qm_whatif_failed {
    int n;
    char (*ids)[QM_ID_BYTES];
} qm_whatif_failed;

typedef struct qm_whatif_spec {
    int n_hosts;               const int *hosts;               /* n == 0: not varied */
    int n_devices_per_host;    const int *devices_per_host;
    int n_device_memory;       const uint64_t *device_memory_bytes;
    int n_without;             const qm_whatif_failed *without;
    int n_dtypes;              qm_dtype dtypes[2];
    bool max;                  /* plan at each variant's largest state (else request.qubits) */
    qm_request request;        /* qubits (unless max), batch, features, policy, ranks... */
} qm_whatif_spec;

typedef struct qm_whatif_row {
    bool base;                 /* the unmodified scenario */
    qm_variant variant;        /* the variation (0 / none: as in the scenario) */
    int without;               /* index into spec->without, -1 for none */
    qm_dtype dtype;
    qm_status error;           /* code != QM_OK: the variant could not be built or planned (the
                                * results below are then unset) or the plan is infeasible */
    bool built;                /* the variant and its mesh exist: hosts..usable_bytes are set */
    int hosts, devices;        /* hosts with at least one device; devices */
    uint64_t memory_bytes, usable_bytes; /* summed over the devices */
    bool planned;              /* a plan was made: the fields below are set */
    unsigned max_qubits;       /* of this dtype; 0 when nothing fits */
    unsigned qubits;           /* planned */
    bool feasible;
    qm_policy policy;          /* used */
    int shards;
    double estimates_s[QM_PHASE_COUNT_];
    bool estimate_set[QM_PHASE_COUNT_];
} qm_whatif_row;

/* Plan every variant. *rows (caller frees with free()) and *n_rows are set on success. Fails,
 * with no rows, with the validator's code for a request no variant can plan (qubits 0, features
 * beyond 2^qubits: qm_request_validate, the rank count excepted), and with E-ARG when the lists
 * give more than QM_WHATIF_MAX_ROWS rows or a variation can be made in no variant (a --without
 * id that names a device in no variant: the message of its first failure, with a "did you
 * mean"). A variant that cannot be built or planned is a row with its error, not a failure. */
qm_code qm_whatif_run(const qm_topology *t, const qm_whatif_spec *spec, qm_whatif_row **rows,
                      int *n_rows, qm_status *st);

#endif
