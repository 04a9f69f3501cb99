/* test_conformance_encode.c — the reference system's distributed amplitude encoding behaviours
 * (Apache Mahout QDP) in our API's terms, on the simulated mesh. The item numbers count those
 * behaviours across the conformance tests: 16 shard values of [1, 2, 3] over two devices; 17 any
 * layout gives the single-device result (ours bit-identical); 18 more values than amplitudes is
 * rejected before device work; 19 empty input is rejected before the layout is looked at; 20 a
 * zero or non-finite norm is rejected, naming the first offending index; 23 shard reads by id,
 * with the dtype checked; 24 the one view of a one-shard state; 25 sum |psi|^2 = 1. Items 21-22
 * (multi-rank: a NaN on one rank, each rank's own input range) are in the comm / MPI tests. */
#include "materialize_internal.h"
#include "qmesh_dlpack.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>

static qm_hal *mesh;

static qm_state *enc(const double *x, uint64_t n, unsigned q, qm_dtype dt, const qm_shard_spec *sh,
                     int nsh, qm_status *st)
{
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n};
    qm_state *s = NULL;
    qm_materialize_amplitude(mesh, q, dt, sh, nsh, &in, NULL, &s, st);
    return s;
}

static void item16(void)
{
    qm_status st;
    const double x[3] = {1, 2, 3};
    qm_shard_spec sh[2] = {{0, 0, 0, 2}, {0, 1, 2, 4}};
    qm_state *s = enc(x, 3, 2, QM_DTYPE_COMPLEX128, sh, 2, &st);
    CHECK(s != NULL);
    double a[8];
    if (s) {
        CHECK_OK(qm_state_read(s, 0, 4, QM_DTYPE_COMPLEX128, a, &st));
        const double r = sqrt(14.0);
        CHECK(fabs(a[0] - 1 / r) < 1e-15 && fabs(a[2] - 2 / r) < 1e-15); /* shard 0 = [1, 2]/sqrt 14 */
        CHECK(fabs(a[4] - 3 / r) < 1e-15 && a[6] == 0.0);                 /* shard 1 = [3/sqrt 14, 0] */
    }
    qm_state_destroy(s);
}

static void item17_25(void)
{
    qm_status st;
    const double x[6] = {1, 2, 3, 4, 5, 6};
    qm_shard_spec one[1] = {{0, 0, 0, 8}};
    qm_shard_spec two[2] = {{0, 0, 0, 4}, {0, 1, 4, 8}};
    qm_shard_spec t3[3] = {{0, 1, 0, 3}, {0, 0, 3, 6}, {0, 2, 6, 8}}; /* T3 balanced: [11, 10, 12] */
    qm_state *s1 = enc(x, 6, 3, QM_DTYPE_COMPLEX128, one, 1, &st);
    qm_state *s2 = enc(x, 6, 3, QM_DTYPE_COMPLEX128, two, 2, &st);
    qm_state *s3 = enc(x, 6, 3, QM_DTYPE_COMPLEX128, t3, 3, &st);
    double a[16], b[16], c[16];
    CHECK(s1 && s2 && s3);
    if (s1 && s2 && s3) {
        CHECK_OK(qm_state_read(s1, 0, 8, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(s2, 0, 8, QM_DTYPE_COMPLEX128, b, &st));
        CHECK_OK(qm_state_read(s3, 0, 8, QM_DTYPE_COMPLEX128, c, &st));
        /* item 17: the reference asks for 1e-12; ours are bit-identical */
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(memcmp(a, c, sizeof a) == 0);
        double t = 0;
        for (int i = 0; i < 8; ++i)
            t += a[2 * i] * a[2 * i] + a[2 * i + 1] * a[2 * i + 1];
        CHECK(fabs(t - 1.0) < 1e-10); /* item 25 */
    }
    qm_state_destroy(s1);
    qm_state_destroy(s2);
    qm_state_destroy(s3);
}

static void item18_19_20(void)
{
    qm_status st;
    qm_state *s = (qm_state *)1;
    const double x[3] = {1, 2, 3};
    qm_shard_spec one[1] = {{0, 0, 0, 2}};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 3};
    /* item 18: 3 values into 1 qubit, before any device work */
    CHECK(qm_materialize_amplitude(mesh, 1, QM_DTYPE_COMPLEX128, one, 1, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "exceeds state vector size");
    CHECK(s == NULL);
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh), 0);
    /* item 19: empty input is rejected before the layout is looked at, even a bad one */
    qm_shard_spec bad[1] = {{0, 99, 5, 3}};
    in.n = 0;
    CHECK(qm_materialize_amplitude(mesh, 1, QM_DTYPE_COMPLEX128, bad, 1, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "cannot be empty");
    /* item 20: zero and non-finite norms, ours naming the first offending index */
    const double zeros[2] = {0, 0}, inf[2] = {1, INFINITY};
    in = (qm_amp_input){.dtype = QM_DTYPE_FLOAT64, .data = zeros, .n = 2};
    CHECK(qm_materialize_amplitude(mesh, 1, QM_DTYPE_COMPLEX128, one, 1, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "zero or non-finite norm");
    in.data = inf;
    CHECK(qm_materialize_amplitude(mesh, 1, QM_DTYPE_COMPLEX128, one, 1, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "zero or non-finite norm: input[1] is +Inf");
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh), 0);
}

static void item23_24(void)
{
    qm_status st;
    const double x[2] = {1, 2};
    qm_shard_spec one[1] = {{0, 3, 0, 2}};
    qm_state *s = enc(x, 2, 1, QM_DTYPE_COMPLEX64, one, 1, &st);
    CHECK(s != NULL);
    if (!s)
        return;
    /* item 24: one shard of a 1-qubit complex64 state of [1, 2] */
    qm_shard_view v;
    CHECK_OK(qm_state_shard_view(s, 0, &v, &st));
    CHECK(v.rank == 0 && v.device == 3 && v.shard == 0);
    CHECK_STR(v.device_id, "d3");
    CHECK(v.start == 0 && v.end == 2 && v.length == 2 && v.data != NULL);
    CHECK(v.dtype == QM_DTYPE_COMPLEX64 && v.host_accessible);
    const float *f = v.data;
    CHECK(f[0] == (float)(1 / sqrt(5.0)) && f[2] == (float)(2 / sqrt(5.0)));
    CHECK(qm_shard_view_valid(&v));
    /* item 23: a shard that does not exist; a complex64 state read as complex128 */
    CHECK(qm_state_shard_view(s, 1, &v, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "out of range");
    double d[4];
    CHECK(qm_state_read(s, 0, 2, QM_DTYPE_COMPLEX128, d, &st) == QM_E_DTYPE);
    CHECK_ERR(st, QM_E_DTYPE, "the state is complex64 but complex128 was requested");
    /* shard reads are by shard id: a layout whose shard 0 lives on device 5 */
    qm_shard_spec sh2[2] = {{0, 5, 0, 1}, {0, 2, 1, 2}};
    qm_state *s2 = enc(x, 2, 1, QM_DTYPE_COMPLEX64, sh2, 2, &st);
    CHECK(s2 != NULL);
    qm_shard_view v1;
    CHECK_OK(qm_state_shard_view(s2, 1, &v1, &st));
    CHECK(v1.device == 2 && v1.start == 1 && ((const float *)v1.data)[0] == (float)(2 / sqrt(5.0)));
    CHECK(v1.device_kind == 1 && v1.cuda_device == -1); /* host memory: no GPU */
    /* DLPack of shard 1 */
    DLManagedTensor *t = NULL;
    CHECK_OK(qm_state_shard_to_dlpack(s2, 1, &t, &st));
    if (t) {
        CHECK(t->dl_tensor.device.device_type == kDLCPU && t->dl_tensor.ndim == 1);
        CHECK(t->dl_tensor.shape[0] == 1 && t->dl_tensor.dtype.code == kDLComplex);
        CHECK(t->dl_tensor.dtype.bits == 64 && t->dl_tensor.dtype.lanes == 1);
        CHECK(t->dl_tensor.data == v1.data && t->dl_tensor.strides == NULL);
        t->deleter(t);
    }
    CHECK(qm_state_shard_to_dlpack(s2, 2, &t, &st) == QM_E_ARG && t == NULL);
    /* gather onto device 7: one shard holding everything, copied over the simulated peer links */
    qm_state *g = NULL;
    CHECK_OK(qm_state_gather(s2, 7, &g, &st));
    float all[4], ga[4];
    CHECK_OK(qm_state_read(s2, 0, 2, QM_DTYPE_COMPLEX64, all, &st));
    if (g) {
        CHECK_OK(qm_state_read(g, 0, 2, QM_DTYPE_COMPLEX64, ga, &st));
        CHECK(memcmp(all, ga, sizeof all) == 0 && qm_state_shard_count(g) == 1);
        CHECK_EQ_U64(qm_hal_sim_link_bytes(mesh, 5, 7), 8);
        CHECK_EQ_U64(qm_hal_sim_link_bytes(mesh, 2, 7), 8);
    }
    qm_state_destroy(g);
    qm_state_destroy(s2);
    qm_state_destroy(s);
    CHECK(!qm_shard_view_valid(&v)); /* the view outlived its state: detected */
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh), 0);
}

int main(void)
{
    qm_status st;
    if (fixture_mesh(8, (uint64_t)1 << 26, true, QM_SIM_MATERIALIZED, &mesh, &st) != QM_OK)
        return 1;
    item16();
    item17_25();
    item18_19_20();
    item23_24();
    qm_hal_destroy(mesh);
    return qm_test_end("test_conformance_encode");
}
