/* cuda_absent.c — the CUDA backend in a build configured with QM_WITH_CUDA=OFF. */
#include "cuda_backend.h"
#include "status_internal.h"

qm_code qm_hal_cuda_open(qm_hal **out, qm_status *st)
{
    if (out)
        *out = NULL;
    return qm_fail(st, QM_E_UNSUPPORTED, "cuda: this build has no CUDA backend; reconfigure with "
                   "-DQM_WITH_CUDA=ON (needs the CUDA toolkit)");
}

qm_code qm_hal_cuda_open_logical(int n_logical, qm_hal **out, qm_status *st)
{
    (void)n_logical;
    return qm_hal_cuda_open(out, st);
}

qm_code qm_hal_cuda_open_logical_at(int first_gpu, int n_logical, qm_hal **out, qm_status *st)
{
    (void)first_gpu;
    (void)n_logical;
    return qm_hal_cuda_open(out, st);
}

int qm_cuda_device_count(void) { return 0; }

qm_code qm_hal_cuda_start(int gpu, qm_status *st)
{
    (void)gpu;
    return qm_hal_cuda_open(NULL, st);
}

void qm_hal_cuda_preload(int gpu) { (void)gpu; }

void qm_hal_cuda_host_prepare(uint64_t bytes) { (void)bytes; }

void qm_hal_cuda_host_release(void) {}

int qm_hal_cuda_host_spares(uint64_t *bytes, int *registered)
{
    if (bytes)
        *bytes = 0;
    if (registered)
        *registered = 0;
    return 0;
}
