/* test_layout.c — qm_layout_host_first_device: which GPU of its host each rank starts at, so
 * that ranks sharing a host (mpirun with one rank per GPU) take different GPUs. */
#include "layout.h"
#include "testlib.h"

#include <stdio.h>

static void expect(const uint64_t *hosts, const int *rank_first, int R, const int *want)
{
    for (int r = 0; r < R; ++r)
        CHECK_EQ_U64((uint64_t)qm_layout_host_first_device(hosts, rank_first, R, r),
                     (uint64_t)want[r]);
}

int main(void)
{
    /* one host, eight ranks of one device: rank r takes GPU r */
    const uint64_t one[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    const int f1[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    expect(one, f1, 8, (const int[]){0, 1, 2, 3, 4, 5, 6, 7});
    /* two hosts of four ranks: each host's ranks start again at GPU 0 */
    const uint64_t two[8] = {1, 1, 1, 1, 2, 2, 2, 2};
    expect(two, f1, 8, (const int[]){0, 1, 2, 3, 0, 1, 2, 3});
    /* hosts interleaved by rank, ranks with 2, 1, 3 and 1 devices: host A holds ranks 0 and 2
     * (GPUs 0-1 and 2-4), host B ranks 1 and 3 (GPU 0 and GPU 1) */
    const uint64_t mixed[4] = {0xA, 0xB, 0xA, 0xB};
    const int f2[5] = {0, 2, 3, 6, 7};
    expect(mixed, f2, 4, (const int[]){0, 0, 2, 1});
    /* out of range and NULL: 0 */
    CHECK_EQ_U64((uint64_t)qm_layout_host_first_device(one, f1, 8, 8), 0);
    CHECK_EQ_U64((uint64_t)qm_layout_host_first_device(one, f1, 8, -1), 0);
    CHECK_EQ_U64((uint64_t)qm_layout_host_first_device(NULL, f1, 8, 3), 0);
    return qm_test_end("test_layout");
}
