/* cli_phantom.c — `qmesh plan --phantom` and `qmesh encode --phantom`: plan, then account every
 * planned shard on a phantom simulated mesh (capacity accounting through the HAL's checking
 * allocator, no memory), so a what-if far beyond this machine is checked shard by shard.
 *
 * In: the scenario path (NULL: the built-in mesh), the request (encode: made from the input's
 * shape, qm_input_file_shape, whose .npy header only is read). Out: the plan as `qmesh plan`
 * prints it (table or JSON), then the bytes reserved per device; JSON adds a "phantom" object.
 * Exit 0, or 1 with one error line (an infeasible plan, E-CAPACITY from the accounting).
 * Must not: allocate memory for the state, read input values, or write outputs (encode refuses
 * --out / --out-dir before calling here).
 */
#include "cli_internal.h"
#include "pipeline.h"
#include "plan_output.h"
#include "status_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* One line per distinct reserved size, largest first: "<bytes> bytes (<size>) on N devices". */
static void print_reserved(const qm_pipeline *pl, const uint64_t *bytes)
{
    const int D = pl->mesh->n_devices;
    uint64_t total = 0, left = UINT64_MAX;
    int holders = 0;
    char a[32];
    for (int d = 0; d < D; ++d) {
        total += bytes[d];
        holders += bytes[d] > 0;
    }
    printf("phantom: %d shards, %llu bytes (%s) reserved on %d of %d devices; no memory allocated\n",
           pl->plan->n_shards, (unsigned long long)total, qm_format_bytes(total, a, sizeof a), holders,
           D);
    for (;;) { /* distinct sizes, descending: few in practice (one or two) */
        uint64_t v = 0;
        bool any = false;
        for (int d = 0; d < D; ++d)
            if (bytes[d] < left && (!any || bytes[d] > v)) {
                v = bytes[d];
                any = true;
            }
        if (!any)
            break;
        int n = 0;
        for (int d = 0; d < D; ++d)
            n += bytes[d] == v;
        printf("  %llu bytes (%s) on %d device%s\n", (unsigned long long)v,
               qm_format_bytes(v, a, sizeof a), n, n == 1 ? "" : "s");
        left = v;
    }
}

static json_t *reserved_json(const qm_pipeline *pl, const uint64_t *bytes)
{
    json_t *o = json_object(), *devs = json_array();
    uint64_t total = 0;
    for (int d = 0; d < pl->mesh->n_devices; ++d) {
        json_t *j = json_object();
        json_object_set_new(j, "id", json_string(pl->mesh->devices[d].id));
        json_object_set_new(j, "reserved_bytes", qm_json_count(bytes[d]));
        json_array_append_new(devs, j);
        total += bytes[d];
    }
    json_object_set_new(o, "shards", json_integer(pl->plan->n_shards));
    json_object_set_new(o, "reserved_bytes", qm_json_count(total));
    json_object_set_new(o, "devices", devs);
    return o;
}

int qm_cli_phantom(const char *cmd, const char *scenario, const qm_request *r, bool json)
{
    qm_status st;
    qm_status_clear(&st);
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    uint64_t *bytes = NULL;
    int exit_code = 1;
    if (qm_cli_load_scenario(scenario, &pl, &st) != QM_OK)
        return qm_cli_error(&st);
    (void)qm_pipeline_plan(&pl, r, &st);
    if (!pl.plan) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    if (!pl.plan->feasible) {
        qm_status e = pl.plan->error;
        qm_status_prefix(&e, "%s --phantom", cmd);
        exit_code = qm_cli_error(&e);
        goto done;
    }
    bytes = calloc((size_t)pl.mesh->n_devices, sizeof *bytes);
    if (!bytes) {
        qm_fail(&st, QM_E_NOMEM, "%s --phantom: out of host memory for %d devices", cmd,
                pl.mesh->n_devices);
        exit_code = qm_cli_error(&st);
        goto done;
    }
    if (qm_pipeline_phantom_account(&pl, bytes, &st) != QM_OK) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    const char *name = qm_topology_label(pl.topology);
    if (json) {
        json_t *o = NULL;
        if (qm_plan_to_json(pl.plan, pl.mesh, name, &o, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            goto done;
        }
        /* plan: the plan object's members at the top; encode: under "plan", as encode prints it */
        if (strcmp(cmd, "encode") == 0)
            o = json_pack("{s:o}", "plan", o);
        json_object_set_new(o, "phantom", reserved_json(&pl, bytes));
        qm_cli_json_put(o);
    } else {
        qm_plan_print(pl.plan, pl.mesh, pl.topology, stdout);
        print_reserved(&pl, bytes);
    }
    exit_code = 0;
done:
    free(bytes);
    qm_pipeline_fini(&pl);
    return exit_code;
}
