/* cli_devices.c — `qmesh devices`: the devices of the mesh qmesh would use (GPUs when present,
 * else the built-in simulated mesh), with their capacity. */
#include "cli_internal.h"
#include "backend.h"
#include "hal.h"
#include "pipeline.h"
#include "status_internal.h"

#include <string.h>

int qm_cli_error(const qm_status *st)
{
    char buf[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 64];
    fprintf(stderr, "%s\n", qm_status_format(st, buf, sizeof buf));
    return 1;
}

int qm_cli_devices(int argc, char **argv)
{
    qm_status st;
    qm_status_clear(&st);
    const char *backend = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            backend = argv[++i];
        } else {
            fprintf(stderr, "error[E-ARG]: devices: unknown option '%s'; usage: qmesh devices "
                    "[--backend sim|cuda]\n", argv[i]);
            return 2;
        }
    }
    if (backend && strcmp(backend, "sim") != 0 && strcmp(backend, "cuda") != 0) {
        fprintf(stderr, "error[E-ARG]: devices: unknown backend '%s'; use sim or cuda\n", backend);
        return 2;
    }
    qm_hal *hal = NULL;
    const qm_backend_kind kind = !backend                    ? QM_BACKEND_AUTO
                                 : strcmp(backend, "cuda") == 0 ? QM_BACKEND_CUDA
                                                               : QM_BACKEND_SIM;
    if (kind == QM_BACKEND_SIM || (kind == QM_BACKEND_AUTO && qm_backend_cuda_count() == 0))
        fprintf(stderr, "qmesh: no GPU in use: using the built-in simulated mesh\n");
    const qm_code rc = qm_pipeline_devices_backend(kind, &hal, &st);
    if (rc != QM_OK)
        return qm_cli_error(&st);
    printf("%-4s %-10s %-24s %14s %14s %12s\n", "dev", "id", "name", "memory", "usable", "hbm");
    for (int d = 0; d < qm_hal_device_count(hal); ++d) {
        qm_hal_device_info in;
        char m[32], u[32], b[32];
        if (qm_hal_device_info_query(hal, d, &in, &st) != QM_OK) {
            qm_hal_destroy(hal);
            return qm_cli_error(&st);
        }
        printf("%-4d %-10s %-24s %14s %14s %12s\n", d, in.id, in.name,
               qm_format_bytes(in.memory_bytes, m, sizeof m),
               qm_format_bytes(in.usable_bytes, u, sizeof u),
               qm_format_rate(in.hbm_bw_bytes_per_s, b, sizeof b));
    }
    printf("backend: %s, %d devices\n", qm_hal_kind_name(qm_hal_kind_get(hal)),
           qm_hal_device_count(hal));
    qm_hal_destroy(hal);
    return 0;
}
