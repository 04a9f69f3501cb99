/* test_hal_sim.c — HAL wrappers over the simulated backend: creation errors, capacity accounting,
 * poisoning (off unless asked for: QM_SIM_POISON_ON or QM_SIM_POISON=1, read once), bounds-checked
 * copies, peer and staged copies with traffic counters, kernels. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include "hal.h"
#include "qm_math.h"
#include "sim.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_create_errors(void)
{
    qm_status st;
    qm_hal *hal = (qm_hal *)1;
    qm_sim_desc empty = {.n_devices = 0};
    CHECK(qm_hal_sim_create(&empty, &hal, &st) == QM_E_ARG);
    CHECK(hal == NULL);
    CHECK_ERR(st, QM_E_ARG, "at least 1 device (got 0)");

    qm_sim_device_desc two[2] = {
        {.id = "g0", .memory_bytes = 100},
        {.id = "g0", .memory_bytes = 100},
    };
    qm_sim_desc dup = {.n_devices = 2, .devices = two};
    CHECK(qm_hal_sim_create(&dup, &hal, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "device id 'g0' appears twice (devices 0 and 1)");

    two[1].id = "g1";
    two[1].reserve_bytes = 100;
    CHECK(qm_hal_sim_create(&dup, &hal, &st) == QM_E_RESERVE);
    CHECK_ERR(st, QM_E_RESERVE, "device g1: reserve 100 B is not below memory 100 B");

    two[1].reserve_bytes = 0;
    qm_sim_peer_desc bad = {.a = 0, .b = 2};
    qm_sim_desc badpeer = {.n_devices = 2, .devices = two, .n_peers = 1, .peers = &bad};
    CHECK(qm_hal_sim_create(&badpeer, &hal, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "peer 0 joins devices 0 and 2");
}

static void test_alloc_and_capacity(void)
{
    qm_status st;
    qm_hal *hal;
    qm_sim_device_desc dd = {.id = "n0.g0", .name = "sim h100", .memory_bytes = 4096,
                             .reserve_bytes = 1024, .hbm_bw_bytes_per_s = 3.35e12};
    qm_sim_desc desc = {.n_devices = 1, .devices = &dd, .poison = QM_SIM_POISON_ON};
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    CHECK(qm_hal_kind_get(hal) == QM_HAL_SIM);
    CHECK_STR(qm_hal_kind_name(qm_hal_kind_get(hal)), "sim");
    CHECK_EQ_U64(qm_hal_device_count(hal), 1);
    qm_hal_device_info info;
    CHECK_OK(qm_hal_device_info_query(hal, 0, &info, &st));
    CHECK_STR(info.id, "n0.g0");
    CHECK_EQ_U64(info.usable_bytes, 3072);
    CHECK(qm_hal_device_info_query(hal, 1, &info, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "device 1 is out of range (this mesh has 1 devices)");

    qm_hal_buf *a, *b, *c = (qm_hal_buf *)1;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 2048, &a, &st));
    unsigned char *p = qm_hal_buf_host_ptr(a);
    CHECK(p != NULL);
    CHECK(p[0] == 0xFF && p[2047] == 0xFF); /* poisoned */
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 1024, &b, &st));
    CHECK(qm_hal_buf_alloc(hal, 0, 1, &c, &st) == QM_E_CAPACITY);
    CHECK(c == NULL);
    CHECK_ERR(st, QM_E_CAPACITY, "buf_alloc on n0.g0: 1 B requested but 3.00 KiB of 3.00 KiB usable is already in use");
    CHECK(qm_hal_buf_alloc(hal, 0, 0, &c, &st) == QM_E_ARG);
    qm_hal_usage u;
    CHECK_OK(qm_hal_usage_query(hal, 0, &u, &st));
    CHECK_EQ_U64(u.in_use_bytes, 3072);
    CHECK_EQ_U64(u.peak_bytes, 3072);
    qm_hal_buf_free(hal, a);
    qm_hal_buf_free(hal, NULL);
    CHECK_OK(qm_hal_usage_query(hal, 0, &u, &st));
    CHECK_EQ_U64(u.in_use_bytes, 1024);
    CHECK_EQ_U64(u.peak_bytes, 3072);
    CHECK_EQ_U64(u.n_allocs, 2);
    CHECK_EQ_U64(u.n_frees, 1);
    qm_hal_buf_free(hal, b);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    qm_hal_destroy(hal);
    qm_hal_destroy(NULL);
}

static void test_copies(void)
{
    qm_status st;
    qm_hal *hal;
    /* 3 devices: 0-1 peers, 2 has no path to anyone */
    qm_sim_device_desc dd[3] = {{.id = "a", .memory_bytes = 1 << 20},
                                {.id = "b", .memory_bytes = 1 << 20},
                                {.id = "c", .memory_bytes = 1 << 20}};
    qm_sim_peer_desc pp = {.a = 1, .b = 0};
    qm_sim_desc desc = {.n_devices = 3, .devices = dd, .n_peers = 1, .peers = &pp};
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    CHECK(qm_hal_peer_get(hal, 0, 1) && qm_hal_peer_get(hal, 1, 0));
    CHECK(!qm_hal_peer_get(hal, 0, 2));
    CHECK(qm_hal_peer_get(hal, 2, 2));
    CHECK(!qm_hal_peer_get(hal, 0, 7));

    qm_hal_buf *b0, *b1, *b2;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 1000, &b0, &st));
    CHECK_OK(qm_hal_buf_alloc(hal, 1, 1000, &b1, &st));
    CHECK_OK(qm_hal_buf_alloc(hal, 2, 1000, &b2, &st));
    unsigned char src[1000], dst[1000];
    for (int i = 0; i < 1000; ++i)
        src[i] = (unsigned char)(i * 7 + 1);
    CHECK_OK(qm_hal_copy_h2d(hal, b0, 0, src, 1000, NULL, &st));
    CHECK(qm_hal_copy_h2d(hal, b0, 1, src, 1000, NULL, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "copy_h2d on a: destination range [1, 1001) is outside the 1000-byte buffer");
    CHECK(qm_hal_copy_d2h(hal, dst, b0, UINT64_MAX, 2, NULL, &st) == QM_E_BOUNDS);
    /* peer copy over the declared link, counted on it */
    CHECK_OK(qm_hal_copy_d2d(hal, b1, 100, b0, 0, 900, NULL, &st));
    CHECK_EQ_U64(qm_hal_sim_link_bytes(hal, 0, 1), 900);
    CHECK_EQ_U64(qm_hal_sim_link_bytes(hal, 1, 0), 0);
    CHECK_OK(qm_hal_copy_d2h(hal, dst, b1, 100, 900, NULL, &st));
    CHECK(memcmp(dst, src, 900) == 0);
    /* no path: staged through the host, counted as d2h + h2d */
    CHECK_OK(qm_hal_copy_d2d(hal, b2, 0, b0, 0, 1000, NULL, &st));
    CHECK_EQ_U64(qm_hal_sim_link_bytes(hal, 0, 2), 0);
    qm_hal_usage u0, u2;
    CHECK_OK(qm_hal_usage_query(hal, 0, &u0, &st));
    CHECK_OK(qm_hal_usage_query(hal, 2, &u2, &st));
    CHECK_EQ_U64(u0.h2d_bytes, 1000);
    CHECK_EQ_U64(u0.d2h_bytes, 1000);
    CHECK_EQ_U64(u0.peer_out_bytes, 900);
    CHECK_EQ_U64(u2.h2d_bytes, 1000);
    memset(dst, 0, sizeof dst);
    CHECK_OK(qm_hal_copy_d2h(hal, dst, b2, 0, 1000, NULL, &st));
    CHECK(memcmp(dst, src, 1000) == 0);
    /* same-device copy with overlap */
    CHECK_OK(qm_hal_copy_d2d(hal, b0, 10, b0, 0, 500, NULL, &st));
    CHECK_OK(qm_hal_copy_d2h(hal, dst, b0, 10, 500, NULL, &st));
    CHECK(memcmp(dst, src, 500) == 0);

    qm_hal_stream *s;
    CHECK_OK(qm_hal_stream_create(hal, 1, &s, &st));
    CHECK_OK(qm_hal_copy_h2d(hal, b1, 0, src, 10, s, &st));
    CHECK_OK(qm_hal_stream_sync(hal, s, &st));
    qm_hal_stream_destroy(hal, s);
    CHECK(qm_hal_stream_create(hal, 3, &s, &st) == QM_E_ARG);

    qm_hal_buf_free(hal, b0);
    qm_hal_buf_free(hal, b1);
    qm_hal_buf_free(hal, b2);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    qm_hal_destroy(hal);
}

static double naive_tree(const double *x, uint64_t n)
{
    if (n == 1)
        return x[0] * x[0];
    return naive_tree(x, n / 2) + naive_tree(x + n / 2, n / 2);
}

static void test_kernels(void)
{
    qm_status st;
    qm_hal *hal;
    CHECK_OK(fixture_mesh(2, 1 << 24, false, QM_SIM_MATERIALIZED, &hal, &st));
    enum { N = 1 << 16 };
    double *x = malloc(N * sizeof *x), *padded = calloc(N, sizeof *padded);
    srand(7);
    for (int i = 0; i < N; ++i)
        x[i] = (double)rand() / RAND_MAX - 0.5;
    qm_hal_buf *in, *state;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, N * sizeof(double), &in, &st));
    CHECK_OK(qm_hal_buf_alloc(hal, 0, (uint64_t)N * 16, &state, &st));
    CHECK_OK(qm_hal_copy_h2d(hal, in, 0, x, N * sizeof(double), NULL, &st));
    /* one state of 2^16 slots, 50000 values: stash them all */
    qm_hal_stash_args sa = {.out = state, .out_dtype = QM_DTYPE_COMPLEX128, .slot_g0 = 0,
                            .period = N, .period_valid = 50000, .in = in,
                            .in_dtype = QM_DTYPE_FLOAT64, .in_off = 0, .in_first = 0, .n = 50000};
    CHECK_OK(qm_hal_stash(hal, &sa, NULL, &st));
    const double *o = qm_hal_buf_host_ptr(state);
    CHECK(o[0] == x[0] && o[1] == 0.0 && o[2 * 49999] == x[49999]);
    CHECK(isnan(o[2 * 50000])); /* padding slots untouched by stash: still poison */
    /* 4 blocks of 2^14: each equals the recursive tree over the zero-padded values */
    double sums[4];
    qm_hal_sumsq_args a = {.state = state, .state_dtype = QM_DTYPE_COMPLEX128, .off = 0, .g0 = 0,
                           .period = N, .period_valid = 50000, .log2_block = 14, .n_blocks = 4,
                           .scale = 1.0, .out_sums = sums};
    CHECK_OK(qm_hal_sumsq_sync(hal, &a, &st));
    memcpy(padded, x, 50000 * sizeof(double));
    for (int b = 0; b < 4; ++b)
        CHECK(sums[b] == naive_tree(padded + b * 16384, 16384)); /* bit-identical */
    /* tiny blocks: 8 blocks of 2 slots, 15 data slots (period 16) */
    double s1[8];
    a.log2_block = 1;
    a.n_blocks = 8;
    a.period = 16;
    a.period_valid = 15;
    a.out_sums = s1;
    CHECK_OK(qm_hal_sumsq_sync(hal, &a, &st));
    CHECK(s1[7] == x[14] * x[14]);
    CHECK(s1[0] == x[0] * x[0] + x[1] * x[1]);
    /* the enqueued form: the same sums, into a device buffer from double 3 */
    qm_hal_buf *dsums = NULL;
    qm_hal_stream *ss = NULL;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 11 * sizeof(double), &dsums, &st));
    CHECK_OK(qm_hal_stream_create(hal, 0, &ss, &st));
    CHECK_OK(qm_hal_sumsq(hal, &a, dsums, 3, ss, &st));
    double back[8];
    CHECK_OK(qm_hal_copy_d2h(hal, back, dsums, 3 * sizeof(double), sizeof back, ss, &st));
    CHECK_OK(qm_hal_stream_sync(hal, ss, &st));
    CHECK(memcmp(back, s1, sizeof back) == 0);
    CHECK(qm_hal_sumsq(hal, &a, dsums, 4, ss, &st) == QM_E_ARG); /* 8 sums from double 4 of 11 */
    CHECK_ERR(st, QM_E_ARG, "sumsq: 8 sums from double 4 do not fit a buffer of 88 bytes");
    CHECK(qm_hal_sumsq(hal, &a, NULL, 0, ss, &st) == QM_E_ARG);
    qm_hal_stream_destroy(hal, ss);
    qm_hal_buf_free(hal, dsums);
    a.n_blocks = 1u << 16; /* past the buffer */
    CHECK(qm_hal_sumsq_sync(hal, &a, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "sumsq on d0: state range [0, 2097152) is outside the 1048576-byte buffer");
    a.n_blocks = 8;
    a.period = 3;
    CHECK(qm_hal_sumsq_sync(hal, &a, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "period 3 with 15 valid slots is not a layout");
    a.state_dtype = QM_DTYPE_FLOAT64;
    CHECK(qm_hal_sumsq_sync(hal, &a, &st) == QM_E_DTYPE);

    /* scan finds the first NaN and the largest magnitude among data slots */
    x[123] = NAN;
    x[77] = -3.5;
    CHECK_OK(qm_hal_copy_h2d(hal, in, 0, x, N * sizeof(double), NULL, &st));
    CHECK_OK(qm_hal_stash(hal, &sa, NULL, &st));
    qm_hal_scan_result r;
    CHECK_OK(qm_hal_scan_sync(hal, state, QM_DTYPE_COMPLEX128, 10, 1000, &r, &st));
    CHECK_EQ_U64(r.first_nonfinite, 113);
    CHECK(r.max_abs == 3.5);

    /* amp_scale in place: slots 74..81 of a state with period 80 and 78 data slots */
    double coeffs[2] = {0.5, 2.0};
    qm_hal_amp_scale_args w = {.state = state, .state_dtype = QM_DTYPE_COMPLEX128, .off = 74,
                               .n = 8, .g0 = 74, .period = 80, .period_valid = 78,
                               .first_state = 0, .n_coeffs = 2, .coeffs = coeffs};
    CHECK_OK(qm_hal_amp_scale(hal, &w, NULL, &st));
    CHECK(o[2 * 74] == x[74] * 0.5 && o[2 * 74 + 1] == 0.0);
    CHECK(o[2 * 77] == -1.75);
    CHECK(o[2 * 78] == 0.0 && o[2 * 79] == 0.0); /* padding of state 0 */
    CHECK(o[2 * 80] == x[80] * 2.0);             /* state 1's coefficient */
    CHECK(o[2 * 82] == x[82]);                   /* outside the range: still the stash */
    w.n_coeffs = 1;
    CHECK(qm_hal_amp_scale(hal, &w, NULL, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "slots span states 0..1 but coefficients cover 0..0");

    /* complex64 in place: the stashed double becomes a float pair */
    qm_hal_buf *c64;
    CHECK_OK(qm_hal_buf_alloc(hal, 1, 64 * 8, &c64, &st));
    qm_hal_buf *in1;
    CHECK_OK(qm_hal_buf_alloc(hal, 1, 64 * 4, &in1, &st));
    float xf[64];
    for (int i = 0; i < 64; ++i)
        xf[i] = (float)(i + 1);
    CHECK_OK(qm_hal_copy_h2d(hal, in1, 0, xf, sizeof xf, NULL, &st));
    /* batch of 4 states of period 16 with 10 values each: 40 input values */
    qm_hal_stash_args s4 = {.out = c64, .out_dtype = QM_DTYPE_COMPLEX64, .slot_g0 = 0, .period = 16,
                            .period_valid = 10, .in = in1, .in_dtype = QM_DTYPE_FLOAT32,
                            .in_off = 0, .in_first = 0, .n = 40};
    CHECK_OK(qm_hal_stash(hal, &s4, NULL, &st));
    double c4[4] = {1, 1, 1, 0.25};
    qm_hal_amp_scale_args w4 = {.state = c64, .state_dtype = QM_DTYPE_COMPLEX64, .off = 0, .n = 64,
                                .g0 = 0, .period = 16, .period_valid = 10, .first_state = 0,
                                .n_coeffs = 4, .coeffs = c4};
    CHECK_OK(qm_hal_amp_scale(hal, &w4, NULL, &st));
    const float *f = qm_hal_buf_host_ptr(c64);
    CHECK(f[0] == 1.0f && f[1] == 0.0f && f[18] == 10.0f);
    CHECK(f[20] == 0.0f && f[31] == 0.0f); /* padding of state 0 */
    CHECK(f[32] == 11.0f);                 /* state 1 starts with input value 11 */
    CHECK(f[96] == 31.0f * 0.25f);         /* state 3, first value 31 */
    /* stash refuses a slot range past the buffer */
    s4.slot_g0 = 1;
    CHECK(qm_hal_stash(hal, &s4, NULL, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "input element 0 lands on global slot 0, before the buffer's first slot 1");
    qm_hal_buf_free(hal, c64);
    qm_hal_buf_free(hal, in1);
    qm_hal_buf_free(hal, in);
    qm_hal_buf_free(hal, state);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    free(x);
    free(padded);
    qm_hal_destroy(hal);
}

/* A block of `bytes` written with 0xAB, freed, and allocated again (the simulator's block cache
 * hands back the same block for the same size): its first and last bytes afterwards. */
static void reuse_bytes(qm_hal *hal, uint64_t bytes, unsigned char *first, unsigned char *last)
{
    qm_status st;
    qm_hal_buf *a = NULL, *b = NULL;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, bytes, &a, &st));
    unsigned char *p = qm_hal_buf_host_ptr(a);
    memset(p, 0xAB, bytes);
    qm_hal_buf_free(hal, a);
    CHECK_OK(qm_hal_buf_alloc(hal, 0, bytes, &b, &st));
    CHECK(qm_hal_buf_host_ptr(b) == (void *)p); /* the cached block */
    *first = ((unsigned char *)qm_hal_buf_host_ptr(b))[0];
    *last = ((unsigned char *)qm_hal_buf_host_ptr(b))[bytes - 1];
    qm_hal_buf_free(hal, b);
}

static void test_poison_switch(void)
{
    qm_status st;
    qm_hal *hal = NULL;
    qm_sim_device_desc dd = {.id = "g0", .memory_bytes = 1 << 20};
    qm_sim_desc desc = {.n_devices = 1, .devices = &dd}; /* poison: QM_SIM_POISON_ENV */
    unsigned char f, l;
    /* default, QM_SIM_POISON unset or 0: nothing is written on allocation or free */
    unsetenv("QM_SIM_POISON");
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    reuse_bytes(hal, 4096, &f, &l);
    CHECK(f == 0xAB && l == 0xAB);
    qm_hal_destroy(hal);
    setenv("QM_SIM_POISON", "0", 1);
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    reuse_bytes(hal, 4096, &f, &l);
    CHECK(f == 0xAB && l == 0xAB);
    qm_hal_destroy(hal);
    /* QM_SIM_POISON=1: 0xFF on free and allocation; read once, when the mesh is created */
    setenv("QM_SIM_POISON", "1", 1);
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    setenv("QM_SIM_POISON", "0", 1);
    reuse_bytes(hal, 4096, &f, &l);
    CHECK(f == 0xFF && l == 0xFF);
    qm_hal_destroy(hal);
    /* the description's own choice overrides the environment */
    setenv("QM_SIM_POISON", "1", 1);
    desc.poison = QM_SIM_POISON_OFF;
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    reuse_bytes(hal, 4096, &f, &l);
    CHECK(f == 0xAB && l == 0xAB);
    qm_hal_destroy(hal);
    unsetenv("QM_SIM_POISON");
    desc.poison = QM_SIM_POISON_ON;
    CHECK_OK(qm_hal_sim_create(&desc, &hal, &st));
    reuse_bytes(hal, 4096, &f, &l);
    CHECK(f == 0xFF && l == 0xFF);
    qm_hal_destroy(hal);
    /* bad values: one line each, no mesh */
    desc.poison = (qm_sim_poison)7;
    hal = (qm_hal *)1;
    CHECK(qm_hal_sim_create(&desc, &hal, &st) == QM_E_ARG);
    CHECK(hal == NULL);
    CHECK_STR(st.msg, "sim: unknown poison mode 7");
    desc.poison = QM_SIM_POISON_ENV;
    setenv("QM_SIM_POISON", "yes", 1);
    CHECK(qm_hal_sim_create(&desc, &hal, &st) == QM_E_ARG);
    CHECK(hal == NULL);
    CHECK_STR(st.msg, "sim: QM_SIM_POISON must be 0 or 1 (got 'yes')");
    unsetenv("QM_SIM_POISON");
}

int main(void)
{
    test_create_errors();
    test_alloc_and_capacity();
    test_poison_switch();
    test_copies();
    test_kernels();
    return qm_test_end("test_hal_sim");
}
