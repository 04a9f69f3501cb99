/* cuda_backend.h — the CUDA backend: real NVIDIA GPUs behind the HAL.
 *
 * qm_hal_cuda_open discovers the GPUs this process can see (CUDA runtime), and returns a HAL over
 * them. Without a GPU it fails with E-UNSUPPORTED ("no CUDA device"); in a build without CUDA it
 * fails with E-UNSUPPORTED naming the configure option QM_WITH_CUDA.
 */
#ifndef QM_CUDA_BACKEND_H
#define QM_CUDA_BACKEND_H

#include "hal.h"

qm_code qm_hal_cuda_open(qm_hal **out, qm_status *st);
/* n_logical devices (0: one per GPU) dealt round-robin onto the GPUs; logical devices that share a
 * GPU each get an equal slice of its memory and reach each other by device-to-device copies, so a
 * multi-device mesh runs (and is tested) on a one-GPU machine. Ids "cuda:G.K". */
qm_code qm_hal_cuda_open_logical(int n_logical, qm_hal **out, qm_status *st);
/* The same starting at GPU first_gpu: logical device i is GPU (first_gpu + i) mod the GPU count,
 * so ranks sharing a host each take their own GPUs (qm_layout_host_first_device). Ids are
 * "cuda:G" while no GPU holds two logical devices, else "cuda:G.K" (K: the logical device's
 * index among those on GPU G). E-ARG for first_gpu < 0. */
qm_code qm_hal_cuda_open_logical_at(int first_gpu, int n_logical, qm_hal **out, qm_status *st);
/* Number of CUDA devices visible (0 without a driver, a GPU, or CUDA support). Cannot fail. */
int qm_cuda_device_count(void);
/* The CUDA runtime's one-time start-up: the driver and runtime initialised and, for gpu >= 0, that
 * GPU's primary context created (cudaSetDevice and cudaFree(0) on the calling thread; the context
 * is the process's, so a later open finds it made). Blocking; thread-safe; the calling thread's
 * current device is left at gpu. E-UNSUPPORTED without a GPU (or in a build without CUDA), E-BACKEND
 * naming the CUDA error. The backend factory runs it on a thread of its own (qm_backend_warmup). */
qm_code qm_hal_cuda_start(int gpu, qm_status *st);
/* On GPU gpu, ahead of the encode that needs them: first the spares prepared by
 * qm_hal_cuda_host_prepare page-locked (cudaHostRegister, in the order prepared: the ingest ring
 * first; a buffer allocation that wants a spare being registered waits for it, one that finds it
 * registered skips the 1.6-4 ms registration), then the amplitude data path's kernels loaded
 * (CUDA loads a kernel lazily, at its first launch: 1-1.5 ms on the critical path of an encode's
 * first chunk; both measured on an H100). Run on the start-up thread after qm_hal_cuda_start,
 * while the caller opens the backend and allocates its states. Blocking; thread-safe; cannot fail
 * (a spare not registered now is registered at its allocation, a kernel not loaded now at its
 * launch, which report any error). gpu < 0: nothing. */
void qm_hal_cuda_preload(int gpu);
/* Host memory for a page-locked buffer of `bytes` made ready ahead of time, e.g. while the
 * start-up runs on another thread: 2 MiB-aligned, advised to use huge pages and touched (the page
 * faults that are most of the cost of page-locking new memory), kept as a spare. The next
 * page-locked allocation (qm_hal_host_alloc on any CUDA backend of the process) whose size rounds
 * up to at least half the spare and at most the spare takes it and only registers it. Needs no
 * GPU and no context; thread-safe; cannot fail (memory that cannot be had is simply not
 * prepared). A page-locked block given back (qm_hal_host_free) stays registered as a spare too,
 * for the next allocation of its size (at most 8 kept). Release frees every spare (unregistering
 * those registered, after waiting for one mid-registration): call it when the buffers are made
 * and at the end of the work (a backend's close calls it too). */
void qm_hal_cuda_host_prepare(uint64_t bytes);
void qm_hal_cuda_host_release(void);
/* How many spares wait to be taken, their bytes and how many of them are page-locked already
 * (either pointer NULL: not wanted). For tests. */
int qm_hal_cuda_host_spares(uint64_t *bytes, int *registered);

#endif
