/* cli_devices.c — `qmesh devices`: the devices of the mesh qmesh would use (GPUs when present,
 * else the built-in simulated mesh, titled as topo show and plan title it), with their capacity;
 * a table or (--json) one object. Must not: name the built-in mesh differently from the others. */
#include "cli_internal.h"
#include "backend.h"
#include "hal.h"
#include "pipeline.h"
#include "plan_output.h"
#include "status_internal.h"

#include <jansson.h>

#include <string.h>

static const qm_cli_flag devices_flags[] = {
    {"--backend", "sim|cuda", "sim: the built-in simulated mesh; cuda: this machine's GPUs "
                              "(default: the GPUs when there are any)"},
    {"--json", NULL, "print one JSON object (docs/cli.md) instead of the table"},
    {NULL, NULL, NULL}};
static const char *const devices_json[] = {"backend", "scenario", "devices", NULL};

static int run_devices(const qm_cli_args *a)
{
    qm_status st;
    qm_status_clear(&st);
    const char *backend = qm_cli_arg(a, "--backend");
    if (backend && strcmp(backend, "sim") != 0 && strcmp(backend, "cuda") != 0)
        return qm_cli_usage_error("devices", "unknown backend '%s'; use sim or cuda", backend);
    qm_hal *hal = NULL;
    const qm_backend_kind kind = !backend                    ? QM_BACKEND_AUTO
                                 : strcmp(backend, "cuda") == 0 ? QM_BACKEND_CUDA
                                                               : QM_BACKEND_SIM;
    /* the simulated mesh is the built-in scenario: name it as topo show and plan do */
    char title[QM_STATUS_FILE_BYTES + 96] = "";
    const char *label = NULL;
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    if (kind == QM_BACKEND_SIM || (kind == QM_BACKEND_AUTO && qm_backend_cuda_count() == 0)) {
        if (qm_pipeline_load(&pl, NULL, NULL, &st) != QM_OK) {
            qm_pipeline_fini(&pl);
            return qm_cli_error(&st);
        }
        qm_topology_title(pl.topology, title, sizeof title);
        label = qm_topology_label(pl.topology);
        fprintf(stderr, "qmesh: no GPU in use: using the built-in simulated mesh '%s'\n",
                pl.topology->name);
    }
    const qm_code rc = qm_pipeline_devices_backend(kind, &hal, &st);
    if (rc != QM_OK) {
        qm_pipeline_fini(&pl);
        return qm_cli_error(&st);
    }
    const int n = qm_hal_device_count(hal);
    json_t *devs = a->json ? json_array() : NULL;
    if (!a->json) {
        if (title[0])
            printf("scenario: %s, %d devices\n", title, n);
        else
            printf("this machine's GPUs (CUDA), %d devices\n", n);
        printf("%-4s %-10s %-24s %14s %14s %12s\n", "dev", "id", "name", "memory", "usable", "hbm");
    }
    int exit_code = 0;
    for (int d = 0; d < n; ++d) {
        qm_hal_device_info in;
        char m[32], u[32], b[32];
        if (qm_hal_device_info_query(hal, d, &in, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            break;
        }
        if (a->json)
            json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:o, s:o, s:f}", "index", d,
                                                  "id", in.id, "name", in.name, "memory_bytes",
                                                  qm_json_count(in.memory_bytes), "usable_bytes",
                                                  qm_json_count(in.usable_bytes),
                                                  "hbm_bandwidth_bytes_per_s",
                                                  in.hbm_bw_bytes_per_s));
        else
            printf("%-4d %-10s %-24s %14s %14s %12s\n", d, in.id, in.name,
                   qm_format_bytes(in.memory_bytes, m, sizeof m),
                   qm_format_bytes(in.usable_bytes, u, sizeof u),
                   qm_format_rate(in.hbm_bw_bytes_per_s, b, sizeof b));
    }
    const char *kind_name = qm_hal_kind_name(qm_hal_kind_get(hal));
    if (a->json)
        qm_cli_json_put(json_pack("{s:s, s:o, s:o}", "backend", kind_name, "scenario",
                                  label ? json_string(label) : json_null(), "devices", devs));
    else if (exit_code == 0)
        printf("backend: %s, %d devices\n", kind_name, n);
    qm_hal_destroy(hal);
    qm_pipeline_fini(&pl);
    return exit_code;
}

const qm_cli_command qm_cli_cmd_devices = {
    .name = "devices",
    .summary = "list the devices qmesh would use: the GPUs when there are any, else the built-in "
               "simulated mesh",
    .flags = devices_flags, .json_members = devices_json, .run = run_devices};
