/* test_phantom.c — phantom memory: a 2^45-amplitude complex128 state (512 TiB) accounted across
 * 4096 simulated devices without allocating it; data operations refused with a clear error. */
#include "hal.h"
#include "sim.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <stdlib.h>

int main(void)
{
    qm_status st;
    qm_hal *hal;
    const int n_dev = 4096;
    const uint64_t state_bytes = ((uint64_t)1 << 45) * 16; /* 2^49 B = 512 TiB */
    const uint64_t shard = state_bytes / (uint64_t)n_dev;   /* 2^37 B = 128 GiB */
    uint64_t rss0 = qm_test_rss_bytes();
    CHECK_OK(fixture_mesh(n_dev, (uint64_t)141e9, false, QM_SIM_PHANTOM, &hal, &st));
    qm_hal_buf **bufs = calloc((size_t)n_dev, sizeof *bufs);
    for (int d = 0; d < n_dev; ++d)
        CHECK_OK(qm_hal_buf_alloc(hal, d, shard, &bufs[d], &st));
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), state_bytes);
    qm_hal_usage u;
    CHECK_OK(qm_hal_usage_query(hal, 4095, &u, &st));
    CHECK_EQ_U64(u.in_use_bytes, (uint64_t)1 << 37);
    uint64_t rss1 = qm_test_rss_bytes();
    printf("phantom: %llu bytes accounted on %d devices; resident %llu -> %llu bytes\n",
           (unsigned long long)state_bytes, n_dev, (unsigned long long)rss0,
           (unsigned long long)rss1);
    CHECK(rss1 < rss0 + ((uint64_t)64 << 20)); /* the state itself is never resident */

    /* capacity is still enforced: a second shard does not fit on a 141 GB device */
    qm_hal_buf *extra = NULL;
    CHECK(qm_hal_buf_alloc(hal, 7, shard, &extra, &st) == QM_E_CAPACITY);
    CHECK_ERR(st, QM_E_CAPACITY, "buf_alloc on d7: 128.00 GiB requested but 128.00 GiB of 131.32 GiB usable is already in use");
    /* data operations are refused, not silently skipped */
    char host[16];
    CHECK(qm_hal_copy_d2h(hal, host, bufs[0], 0, sizeof host, NULL, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, "copy_d2h on d0: copy: phantom devices hold no data");
    for (int d = 0; d < n_dev; ++d)
        qm_hal_buf_free(hal, bufs[d]);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    free(bufs);
    qm_hal_destroy(hal);
    return qm_test_end("test_phantom");
}
