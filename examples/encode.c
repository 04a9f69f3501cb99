/* encode.c — a complete program on the public API of qmesh (qmesh.h, qmesh_dlpack.h only).
 *
 * Loads the built-in simulated mesh (or the scenario file given as argv[1]), plans 3-qubit
 * complex128 amplitude encoding of a batch of 2 rows of 5 float64 features, prints the plan's
 * feasibility and shard ranges, materializes the states on the simulator, prints every amplitude,
 * checks each state's norm, exports shard 0 through DLPack and frees everything.
 * Exit 0 on success; on any error one line (qm_status_format) on stderr and exit 1.
 */
#include <qmesh.h>
#include <qmesh_dlpack.h>

#include <math.h>
#include <stdio.h>

#define ROWS 2
#define FEATURES 5
#define QUBITS 3
#define AMPS (1u << QUBITS)

static int fail(const qm_status *st)
{
    char line[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 64];
    fprintf(stderr, "%s\n", qm_status_format(st, line, sizeof line));
    return 1;
}

int main(int argc, char **argv)
{
    static const double rows[ROWS][FEATURES] = {{1, 2, 3, 4, 5}, {0.5, -1.5, 2.5, -3.5, 4.5}};
    qm_status st;
    qm_status_clear(&st);
    qm_scenario *scenario = NULL;
    qm_context *ctx = NULL;
    qm_state *state = NULL;
    DLManagedTensor *tensor = NULL;
    int rc = 1;

    if (qm_scenario_open(argc > 1 ? argv[1] : NULL, &scenario, &st) != QM_OK)
        return fail(&st);
    printf("scenario: %s\n", qm_scenario_name(scenario));

    qm_request req;
    qm_request_init(&req);
    req.qubits = QUBITS;
    req.dtype = QM_DTYPE_COMPLEX128;
    req.batch = ROWS;
    req.features = FEATURES;
    if (qm_context_create(scenario, &req, &ctx, &st) != QM_OK)
        goto done;
    qm_scenario_destroy(scenario); /* the context keeps it alive */
    scenario = NULL;

    qm_plan_info info;
    if (qm_context_plan_info(ctx, &info, &st) != QM_OK)
        goto done;
    printf("plan: %s, policy %s, %d shard%s, %llu amplitudes, %llu bytes\n",
           info.feasible ? "feasible" : "infeasible", qm_policy_name(info.policy), info.n_shards,
           info.n_shards == 1 ? "" : "s", (unsigned long long)info.amplitudes,
           (unsigned long long)info.state_bytes);
    if (!info.feasible) {
        st = info.error;
        goto done;
    }
    for (int i = 0; i < info.n_shards; ++i) {
        qm_shard_info sh;
        if (qm_context_plan_shard(ctx, i, &sh, &st) != QM_OK)
            goto done;
        printf("shard %d: device %s, amplitudes [%llu, %llu)\n", sh.shard, sh.device_id,
               (unsigned long long)sh.start, (unsigned long long)sh.end);
    }

    if (qm_context_open(ctx, QM_BACKEND_SIM, &st) != QM_OK)
        goto done;
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = ROWS,
                             .features = FEATURES};
    if (qm_context_encode(ctx, &in, &state, &st) != QM_OK)
        goto done;

    double amps[ROWS * AMPS * 2]; /* interleaved re, im */
    if (qm_state_read(state, 0, ROWS * AMPS, QM_DTYPE_COMPLEX128, amps, &st) != QM_OK)
        goto done;
    for (int r = 0; r < ROWS; ++r) {
        double sum = 0;
        for (unsigned k = 0; k < AMPS; ++k) {
            const double re = amps[2 * (r * AMPS + k)], im = amps[2 * (r * AMPS + k) + 1];
            printf("state %d amplitude %u: %.17g %.17g\n", r, k, re, im);
            sum += re * re + im * im;
        }
        if (!(fabs(sum - 1.0) <= 1e-12)) {
            fprintf(stderr, "error: state %d has norm^2 %.17g, not 1\n", r, sum);
            goto done;
        }
        printf("state %d: norm ok\n", r);
    }

    if (qm_state_shard_to_dlpack(state, 0, &tensor, &st) != QM_OK)
        goto done;
    const DLTensor *t = &tensor->dl_tensor;
    printf("dlpack shard 0: ndim %d, shape [%lld], dtype code %u bits %u lanes %u, device %s:%d\n",
           t->ndim, (long long)t->shape[0], (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
           (unsigned)t->dtype.lanes, t->device.device_type == kDLCPU ? "cpu" : "cuda",
           t->device.device_id);
    rc = 0;
done:
    if (rc != 0 && st.code != QM_OK)
        fail(&st);
    if (tensor)
        tensor->deleter(tensor);
    qm_state_destroy(state);
    qm_context_destroy(ctx);
    qm_scenario_destroy(scenario);
    return rc;
}
