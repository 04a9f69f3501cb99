/* test_cuda_smoke.c — the CUDA backend on a real GPU: discovery, allocation, copies, kernels equal
 * to the simulated backend bit for bit. Exit 77 (skipped) when there is no GPU or no CUDA build. */
#include "cuda_backend.h"
#include "fault.h"
#include "materialize_internal.h"
#include "qmesh_dlpack.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    qm_status st;
    qm_hal *gpu = NULL, *sim = NULL;
    if (qm_hal_cuda_open(&gpu, &st) != QM_OK) {
        printf("test_cuda_smoke: skipped: %s\n", st.msg);
        CHECK(st.code == QM_E_UNSUPPORTED);
        return qm_test_failures ? 1 : 77;
    }
    qm_hal_device_info info;
    CHECK_OK(qm_hal_device_info_query(gpu, 0, &info, &st));
    printf("cuda:0 = %s, %llu bytes, %llu usable, %d SMs\n", info.name,
           (unsigned long long)info.memory_bytes, (unsigned long long)info.usable_bytes,
           info.sm_count);
    CHECK(info.memory_bytes > 0 && info.usable_bytes > 0 && info.sm_count > 0);
    CHECK(qm_hal_kind_get(gpu) == QM_HAL_CUDA);

    /* a state on the GPU equals the simulated one, byte for byte */
    const unsigned q = 20;
    const uint64_t n = 777777, N = (uint64_t)1 << q;
    double *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = cos((double)i * 0.37) * (double)(1 + i % 5);
    CHECK_OK(fixture_mesh(2, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &sim, &st));
    qm_shard_spec one = {0, 0, 0, N};
    qm_shard_spec two[2] = {{0, 0, 0, N / 2}, {0, 1, N / 2, N}};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n};
    qm_state *sg = NULL, *ss = NULL;
    CHECK_OK(qm_materialize_amplitude(gpu, q, QM_DTYPE_COMPLEX128, &one, 1, &in, NULL, &sg, &st));
    if (st.code)
        fprintf(stderr, "%s\n", st.msg);
    CHECK_OK(qm_materialize_amplitude(sim, q, QM_DTYPE_COMPLEX128, two, 2, &in, NULL, &ss, &st));
    double *a = malloc(N * 16), *b = malloc(N * 16);
    if (sg && ss) {
        CHECK_OK(qm_state_read(sg, 0, N, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(ss, 0, N, QM_DTYPE_COMPLEX128, b, &st));
        CHECK(memcmp(a, b, N * 16) == 0);
    }
    qm_state_destroy(sg);
    qm_state_destroy(ss);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);

    /* a shard's view and DLPack tensor name the physical GPU, not the mesh device index: four
     * logical devices on GPU 0, the shard on device 3 lives on CUDA device 0 */
    qm_hal *logical = NULL;
    CHECK_OK(qm_hal_cuda_open_logical_at(0, 4, &logical, &st));
    if (logical) {
        qm_shard_spec on3 = {0, 3, 0, 1024};
        qm_amp_input in3 = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 1000};
        qm_state *s3 = NULL;
        CHECK_OK(qm_materialize_amplitude(logical, 10, QM_DTYPE_COMPLEX128, &on3, 1, &in3, NULL,
                                          &s3, &st));
        qm_shard_view v3;
        DLManagedTensor *t3 = NULL;
        if (s3 && qm_state_shard_view(s3, 0, &v3, &st) == QM_OK) {
            CHECK(v3.device == 3 && v3.device_kind == 2 && v3.cuda_device == 0);
            CHECK(!v3.host_accessible);
        }
        CHECK_OK(qm_state_shard_to_dlpack(s3, 0, &t3, &st));
        if (t3) {
            CHECK(t3->dl_tensor.device.device_type == kDLCUDA);
            CHECK(t3->dl_tensor.device.device_id == 0);
            t3->deleter(t3);
        }
        qm_state_destroy(s3);
        /* under the fault shim (counting only) the memory is still the GPU's: where memory lives
         * is the device's property, not the backend kind's */
        qm_fault_config fc = {.points = QM_FAULT_ALL, .fail_at = 0, .code = QM_E_BACKEND};
        qm_hal *shim = NULL;
        CHECK_OK(qm_hal_fault_create(logical, &fc, &shim, &st)); /* takes `logical` */
        logical = NULL;
        s3 = NULL;
        if (shim)
            CHECK_OK(qm_materialize_amplitude(shim, 10, QM_DTYPE_COMPLEX128, &on3, 1, &in3, NULL,
                                              &s3, &st));
        if (s3 && qm_state_shard_view(s3, 0, &v3, &st) == QM_OK)
            CHECK(v3.device_kind == 2 && v3.cuda_device == 0 && !v3.host_accessible);
        qm_state_destroy(s3);
        qm_hal_destroy(shim);
        qm_hal_destroy(logical);
    }
    /* an allocation beyond the device is refused by the wrapper with numbers */
    qm_hal_buf *big = NULL;
    CHECK(qm_hal_buf_alloc(gpu, 0, info.usable_bytes + 1, &big, &st) == QM_E_CAPACITY);
    CHECK(big == NULL);
    CHECK(strstr(st.msg, "usable") != NULL);

    /* freed buffers are kept and handed out again for the same size (hal.h, qm_hal_trim) */
    const uint64_t gib = (uint64_t)1 << 30;
    qm_hal_buf *k1 = NULL, *k2 = NULL;
    CHECK_OK(qm_hal_buf_alloc(gpu, 0, 4 * gib, &k1, &st));
    void *k1_raw = qm_hal_buf_raw(k1);
    qm_hal_buf_free(gpu, k1);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
    CHECK_OK(qm_hal_buf_alloc(gpu, 0, 4 * gib, &k2, &st));
    CHECK(k2 && qm_hal_buf_raw(k2) == k1_raw);
    qm_hal_buf_free(gpu, k2);
    /* trim gives them back: a HAL opened afterwards sees 4 GiB more free memory */
    qm_hal *probe = NULL;
    qm_hal_device_info before, after;
    CHECK_OK(qm_hal_cuda_open(&probe, &st));
    CHECK_OK(qm_hal_device_info_query(probe, 0, &before, &st));
    qm_hal_destroy(probe);
    qm_hal_trim(gpu);
    CHECK_OK(qm_hal_cuda_open(&probe, &st));
    CHECK_OK(qm_hal_device_info_query(probe, 0, &after, &st));
    qm_hal_destroy(probe);
    printf("usable before trim %llu, after %llu\n", (unsigned long long)before.usable_bytes,
           (unsigned long long)after.usable_bytes);
    CHECK(after.usable_bytes >= before.usable_bytes + 4 * gib - (64u << 20));
    /* a kept 4 GiB buffer again, for the next part */
    CHECK_OK(qm_hal_buf_alloc(gpu, 0, 4 * gib, &k1, &st));
    qm_hal_buf_free(gpu, k1);

    /* memory taken behind this HAL's back (as by another process: a second, independent HAL
     * holds all but 2 GiB of what this one counts as usable): the wrapper's accounting lets a
     * 16 GiB state through, the backend's cudaMalloc fails, and the encode reports E-CAPACITY
     * naming cudaMalloc, with nothing left allocated */
    qm_hal *other = NULL;
    qm_hal_buf *hog = NULL;
    CHECK_OK(qm_hal_cuda_open(&other, &st));
    qm_hal_device_info oinfo;
    CHECK_OK(qm_hal_device_info_query(other, 0, &oinfo, &st));
    const uint64_t keep = (uint64_t)2 << 30;
    CHECK(oinfo.usable_bytes > keep);
    CHECK_OK(qm_hal_buf_alloc(other, 0, oinfo.usable_bytes - keep, &hog, &st));
    if (hog) {
        /* 5 GiB do not fit in the 2 GiB left, but this HAL keeps 4 GiB: it gives them back and
         * cudaMalloc succeeds on the second try (the 5 GiB buffer is then kept in turn) */
        qm_hal_buf *five = NULL;
        CHECK_OK(qm_hal_buf_alloc(gpu, 0, 5 * gib, &five, &st));
        if (st.code)
            fprintf(stderr, "%s\n", st.msg);
        qm_hal_buf_free(gpu, five);
        const unsigned q30 = 30;
        const uint64_t n30 = 1000; /* a 2^30-slot complex128 state: 16 GiB > the 2 GiB left */
        qm_amp_input in30 = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n30};
        qm_shard_spec all30 = {0, 0, 0, (uint64_t)1 << q30};
        qm_state *s30 = (qm_state *)1;
        qm_code rc = qm_materialize_amplitude(gpu, q30, QM_DTYPE_COMPLEX128, &all30, 1, &in30, NULL,
                                              &s30, &st);
        printf("memory taken elsewhere: %s\n", st.msg);
        CHECK(rc == QM_E_CAPACITY);
        CHECK(s30 == NULL);
        CHECK(strstr(st.msg, "cudaMalloc") != NULL);
        CHECK(strstr(st.msg, "cudaErrorMemoryAllocation") != NULL);
        CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
        /* the GPU still works afterwards (the sticky error was cleared) */
        qm_state *again = NULL;
        CHECK_OK(qm_materialize_amplitude(gpu, q, QM_DTYPE_COMPLEX128, &one, 1, &in, NULL, &again,
                                          &st));
        qm_state_destroy(again);
    }
    qm_hal_buf_free(other, hog);
    CHECK_EQ_U64(qm_hal_bytes_in_use(other), 0);
    qm_hal_destroy(other);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
    free(a);
    free(b);
    free(x);
    qm_hal_destroy(sim);
    qm_hal_destroy(gpu);
    return qm_test_end("test_cuda_smoke");
}
