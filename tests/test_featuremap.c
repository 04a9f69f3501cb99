/* test_featuremap.c — the product-state encodings (angle, basis, phase) on the simulated mesh:
 * every amplitude against the definitions (docs/encodings.md) computed here independently in long
 * double, exhaustively for n = 1..10 and sampled for n = 21, 22; the states bit-identical over 1, 2, 4 and 8 devices, batch
 * layouts and complex64/complex128 (complex64 = complex128 rounded once); the edge states (angle 0
 * is |0..0>, angle pi/2 is |1..1>, basis j is |j>); every bad input with its message; nothing
 * left allocated. */
#include "featuremap_fixtures.h"
#include "materialize_internal.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static qm_hal *mesh8;

/* Encode B samples of F doubles into 2^q amplitudes each over k devices; the amplitudes as
 * complex128 (malloc'd, 2 B 2^q doubles) or NULL with st set. */
static double *run(qm_encoding enc, const double *x, uint64_t F, uint64_t B, unsigned q, int k,
                   qm_dtype dt, qm_status *st)
{
    qm_shard_spec sh[8];
    fm_layout(B << q, k, sh);
    return fm_run(mesh8, enc, x, F, B, q, sh, k, dt, st);
}

/* The definition, in long double: amplitude i of one sample. */
static void reference(qm_encoding enc, const double *x, unsigned q, uint64_t i, long double *re,
                      long double *im)
{
    long double r = 1, m = 0;
    switch (enc) {
    case QM_ENCODING_ANGLE:
        for (unsigned k = 0; k < q; ++k)
            r *= (i >> k) & 1 ? sinl(x[k]) : cosl(x[k]);
        break;
    case QM_ENCODING_PHASE: {
        long double phi = 0;
        for (unsigned k = 0; k < q; ++k)
            phi += (i >> k) & 1 ? (long double)x[k] : 0;
        const long double c = powl(2.0L, -(long double)q / 2);
        r = c * cosl(phi);
        m = c * sinl(phi);
        break;
    }
    case QM_ENCODING_IQP_Z: /* prod_k (1 + (-1)^bit_k e^(i x_k)) / 2: the definition's sum over
                               x taken one bit at a time (test_iqp checks the sum itself) */
        for (unsigned k = 0; k < q; ++k) {
            const long double sg = (i >> k) & 1 ? -1 : 1, fr = (1 + sg * cosl(x[k])) / 2,
                              fi = sg * sinl(x[k]) / 2, t = r * fr - m * fi;
            m = r * fi + m * fr;
            r = t;
        }
        break;
    default:
        r = i == (uint64_t)x[0];
        break;
    }
    *re = r;
    *im = m;
}

static double urand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1p-53;
}

/* Exhaustive against the definition for n = 1..10, batches of 3 samples, 1 and 4 devices. */
static void test_definitions(void)
{
    const qm_encoding encs[] = {QM_ENCODING_ANGLE, QM_ENCODING_PHASE, QM_ENCODING_BASIS,
                                QM_ENCODING_IQP_Z};
    uint64_t seed = 0x243f6a8885a308d3ull;
    for (int e = 0; e < 4; ++e)
        for (unsigned q = 1; q <= 10; ++q) {
            const uint64_t F = qm_encoding_features(encs[e], q), B = 3, N = (uint64_t)1 << q;
            double x[30];
            for (uint64_t i = 0; i < B * F; ++i)
                x[i] = encs[e] == QM_ENCODING_BASIS ? floor(urand(&seed) * (double)N)
                                                    : (urand(&seed) * 2 - 1) * 7.0;
            qm_status st;
            double *a1 = run(encs[e], x, F, B, q, 1, QM_DTYPE_COMPLEX128, &st);
            double *a4 = q >= 1 ? run(encs[e], x, F, B, q, 4, QM_DTYPE_COMPLEX128, &st) : NULL;
            CHECK(a1 && a4);
            if (!a1 || !a4) {
                fprintf(stderr, "%s q=%u: %s\n", qm_encoding_name(encs[e]), q, st.msg);
                free(a1), free(a4);
                continue;
            }
            CHECK(memcmp(a1, a4, (size_t)(B * N) * 16) == 0);
            double worst = 0;
            for (uint64_t s = 0; s < B; ++s) {
                long double sum = 0;
                for (uint64_t i = 0; i < N; ++i) {
                    long double re, im;
                    reference(encs[e], x + s * F, q, i, &re, &im);
                    const double *g = a1 + 2 * (s * N + i);
                    const double d = (double)fmaxl(fabsl(g[0] - re), fabsl(g[1] - im));
                    if (d > worst)
                        worst = d;
                    sum += (long double)g[0] * g[0] + (long double)g[1] * g[1];
                }
                /* normalized within 1e-14 */
                CHECK(fabsl(sum - 1) <= 1e-14L);
            }
            /* n products of correctly rounded factors: a few ulp of 1 */
            CHECK(worst <= 16 * (double)q * 0x1p-53);
            if (worst > 16 * (double)q * 0x1p-53)
                fprintf(stderr, "%s q=%u: max error %g\n", qm_encoding_name(encs[e]), q, worst);
            free(a1);
            free(a4);
        }
}

/* Past two digits of the evaluation order (n = 21, 22: hi = T_1 * T_2, qm_math.h): one state on 1
 * and 8 devices bit-identical, and 8192 amplitudes spread over the state (every 1024-block's first
 * and a stride through the rest) against the definition, within the bound of n = 1..10. */
static void test_definitions_wide(void)
{
    const qm_encoding encs[] = {QM_ENCODING_ANGLE, QM_ENCODING_PHASE, QM_ENCODING_IQP_Z};
    uint64_t seed = 0x13198a2e03707344ull;
    for (int e = 0; e < 3; ++e)
        for (unsigned q = 21; q <= 22; ++q) {
            const uint64_t N = (uint64_t)1 << q;
            double x[22];
            for (unsigned k = 0; k < q; ++k)
                x[k] = (urand(&seed) * 2 - 1) * 7.0;
            qm_status st;
            double *a1 = run(encs[e], x, q, 1, q, 1, QM_DTYPE_COMPLEX128, &st);
            double *a8 = run(encs[e], x, q, 1, q, 8, QM_DTYPE_COMPLEX128, &st);
            CHECK(a1 && a8);
            if (!a1 || !a8) {
                fprintf(stderr, "%s q=%u: %s\n", qm_encoding_name(encs[e]), q, st.msg);
                free(a1), free(a8);
                continue;
            }
            CHECK(memcmp(a1, a8, (size_t)N * 16) == 0);
            double worst = 0;
            for (uint64_t k = 0; k < 8192; ++k) {
                const uint64_t i = k < 4096 ? k * (N / 4096) : (k * 2654435761u) % N;
                long double re, im;
                reference(encs[e], x, q, i, &re, &im);
                const double d = (double)fmaxl(fabsl(a1[2 * i] - re), fabsl(a1[2 * i + 1] - im));
                if (d > worst)
                    worst = d;
            }
            CHECK(worst <= 16 * (double)q * 0x1p-53);
            if (worst > 16 * (double)q * 0x1p-53)
                fprintf(stderr, "%s q=%u: max error %g\n", qm_encoding_name(encs[e]), q, worst);
            free(a1);
            free(a8);
        }
}

/* One state over 1, 2, 4, 8 devices and a batch dealt over 8: the same bits; complex64 is the
 * complex128 state rounded once; the edge states. */
static void test_layouts_and_edges(void)
{
    qm_status st;
    double x[14];
    uint64_t seed = 99;
    for (int i = 0; i < 14; ++i)
        x[i] = (urand(&seed) - 0.5) * 12;
    double *ref = run(QM_ENCODING_PHASE, x, 14, 1, 14, 1, QM_DTYPE_COMPLEX128, &st);
    CHECK(ref != NULL);
    for (int k = 2; ref && k <= 8; k *= 2) {
        double *a = run(QM_ENCODING_PHASE, x, 14, 1, 14, k, QM_DTYPE_COMPLEX128, &st);
        CHECK(a && memcmp(a, ref, (size_t)16 << 14) == 0);
        free(a);
    }
    /* complex64: the same products in double, rounded once to float */
    {
        qm_shard_spec sh[8];
        fm_layout((uint64_t)1 << 14, 2, sh);
        qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 14, .batch = 1};
        qm_state *s = NULL;
        CHECK_OK(qm_materialize_featuremap(mesh8, QM_ENCODING_PHASE, 14, QM_DTYPE_COMPLEX64, sh, 2,
                                           &in, NULL, &s, &st));
        float *f = malloc((size_t)8 << 14);
        CHECK(f && s && qm_state_read(s, 0, 1u << 14, QM_DTYPE_COMPLEX64, f, &st) == QM_OK);
        bool same = true;
        for (uint64_t i = 0; f && ref && i < 2u << 14; ++i)
            same = same && f[i] == (float)ref[i];
        CHECK(same);
        free(f);
        qm_state_destroy(s);
    }
    free(ref);
    /* iqp-z: all-zero data gives |0..0> exactly; a state cut over 3 unequal shards (no
     * transform: any layout) is the 1-device state's bytes */
    {
        double zero[6] = {0};
        double *a = run(QM_ENCODING_IQP_Z, zero, 6, 1, 6, 2, QM_DTYPE_COMPLEX128, &st);
        bool exact = a != NULL && a[0] == 1.0 && a[1] == 0.0;
        for (int i = 2; a && i < 2 << 6; ++i)
            exact = exact && a[i] == 0.0;
        CHECK(exact);
        free(a);
        double v[12];
        for (int i = 0; i < 12; ++i)
            v[i] = (urand(&seed) - 0.5) * 9;
        double *one = run(QM_ENCODING_IQP_Z, v, 12, 1, 12, 1, QM_DTYPE_COMPLEX128, &st);
        qm_shard_spec sh[3] = {{0, 0, 0, 1000}, {0, 1, 1000, 1024}, {0, 2, 1024, 4096}};
        qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = v, .n = 12, .batch = 1};
        qm_state *s = NULL;
        CHECK_OK(qm_materialize_featuremap(mesh8, QM_ENCODING_IQP_Z, 12, QM_DTYPE_COMPLEX128, sh, 3,
                                           &in, NULL, &s, &st));
        double *b = malloc((size_t)16 << 12);
        CHECK(b && s && qm_state_read(s, 0, 1u << 12, QM_DTYPE_COMPLEX128, b, &st) == QM_OK);
        CHECK(one && b && memcmp(one, b, (size_t)16 << 12) == 0);
        free(b);
        free(one);
        qm_state_destroy(s);
    }
    /* angle 0 everywhere: |0..0>; pi/2 everywhere: |1..1> (cos(pi/2) is 6.1e-17, not 0) */
    double z[5] = {0}, h[5];
    for (int i = 0; i < 5; ++i)
        h[i] = 1.5707963267948966; /* pi/2 rounded to double */
    double *a = run(QM_ENCODING_ANGLE, z, 5, 1, 5, 2, QM_DTYPE_COMPLEX128, &st);
    CHECK(a && a[0] == 1.0 && a[1] == 0.0);
    for (int i = 1; a && i < 32; ++i)
        CHECK(a[2 * i] == 0.0 && a[2 * i + 1] == 0.0);
    free(a);
    a = run(QM_ENCODING_ANGLE, h, 5, 1, 5, 2, QM_DTYPE_COMPLEX128, &st);
    CHECK(a && a[62] == 1.0 && a[63] == 0.0);
    for (int i = 0; a && i < 31; ++i)
        CHECK(fabs(a[2 * i]) <= 6.2e-17 && a[2 * i + 1] == 0.0);
    free(a);
    /* basis: a batch of 4 indices dealt over 4 devices, one sample each */
    const double j[4] = {0, 5, 7, 2};
    a = run(QM_ENCODING_BASIS, j, 1, 4, 3, 4, QM_DTYPE_COMPLEX128, &st);
    CHECK(a != NULL);
    for (int s = 0; a && s < 4; ++s)
        for (int i = 0; i < 8; ++i)
            CHECK(a[2 * (8 * s + i)] == (i == (int)j[s] ? 1.0 : 0.0) && a[2 * (8 * s + i) + 1] == 0.0);
    free(a);
}

static void expect_fail(qm_encoding enc, const double *x, uint64_t F, uint64_t B, unsigned q,
                        qm_code code, const char *msg)
{
    qm_status st;
    qm_status_clear(&st);
    double *a = run(enc, x, F, B, q, 2, QM_DTYPE_COMPLEX128, &st);
    CHECK(a == NULL && st.code == code);
    CHECK_STR(st.msg, msg);
    free(a);
}

static void test_errors(void)
{
    const double nan3[6] = {0.1, 0.2, 0.3, 0.4, NAN, 0.6};
    expect_fail(QM_ENCODING_ANGLE, nan3, 3, 2, 3, QM_E_INPUT,
                "encode: sample 1, value 1 is NaN; the angle encoding needs finite values");
    const double inf[2] = {1, -INFINITY};
    expect_fail(QM_ENCODING_PHASE, inf, 2, 1, 2, QM_E_INPUT,
                "encode: sample 0, value 1 is -Inf; the phase encoding needs finite values");
    const double j[4] = {1, 2.5, 3, 4};
    expect_fail(QM_ENCODING_BASIS, j, 1, 4, 2, QM_E_INPUT,
                "encode: sample 1: basis index 2.5 is not an integer in [0, 4) (2 qubits)");
    const double big[2] = {3, 4};
    expect_fail(QM_ENCODING_BASIS, big, 1, 2, 2, QM_E_INPUT,
                "encode: sample 1: basis index 4 is not an integer in [0, 4) (2 qubits)");
    const double neg[2] = {-1, 0};
    expect_fail(QM_ENCODING_BASIS, neg, 1, 2, 2, QM_E_INPUT,
                "encode: sample 0: basis index -1 is not an integer in [0, 4) (2 qubits)");
    const double four[4] = {0};
    expect_fail(QM_ENCODING_ANGLE, four, 4, 1, 3, QM_E_INPUT,
                "encode: the angle encoding of 3 qubits takes 3 values per sample, got 4");
    expect_fail(QM_ENCODING_AMPLITUDE, four, 4, 1, 3, QM_E_UNSUPPORTED,
                "encode: the amplitude encoding is not a feature map (angle, basis, phase, iqp-z "
                "and iqp are)");
}

int main(void)
{
    qm_status st;
    if (fixture_mesh(8, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &mesh8, &st) != QM_OK) {
        fprintf(stderr, "%s\n", st.msg);
        return 1;
    }
    test_definitions();
    test_definitions_wide();
    test_layouts_and_edges();
    test_errors();
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
    qm_hal_destroy(mesh8);
    return qm_test_end("test_featuremap");
}
