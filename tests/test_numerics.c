#define _POSIX_C_SOURCE 200809L
/* test_numerics.c — amplitude encoding of every finite nonzero input (issue 13 item 3), on the
 * simulated mesh and through `qmesh encode`: all-subnormal vectors, values near DBL_MAX and
 * FLT_MAX, float32 subnormals, mixes of subnormal and normal values; single states and batches
 * (the fused batch kernel and the long-state path), one and several shards, complex64 and
 * complex128. Expected values are exact:
 * - a vector of equal values gives equal amplitudes (4 values: 0.5 exactly);
 * - scale invariance: x * 2^k (exact for small integers x) encodes to the same bytes as x, for
 *   every k from -1074 (smallest subnormal) to +1013 (near DBL_MAX), because the fast path and
 *   the rescaled slow path both scale by exact powers of two (kernels/qm_math.h);
 * - qm_rescale_factor against frexp for every exponent, subnormals included;
 * - qm_hal_amp_scale with per-state scales: (x * scale) * coeff, exactly.
 * Arguments: the qmesh binary (for the CLI part; optional). */
#include "materialize_internal.h"
#include "qm_math.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static qm_hal *mesh;

/* Encode n values (float64 or float32) of `batch` states (0: one) into q qubits over k equal
 * shards; returns the state bytes (malloc'd) or NULL with st set. */
static void *encode(const void *x, qm_dtype in_dt, uint64_t n, uint64_t batch, unsigned q,
                    qm_dtype out_dt, int k, qm_status *st)
{
    const uint64_t B = batch ? batch : 1, total = B << q, len = total / (uint64_t)k;
    qm_shard_spec sh[8];
    for (int i = 0; i < k; ++i)
        sh[i] = (qm_shard_spec){.rank = 0, .device = i, .start = len * (uint64_t)i,
                                .end = i == k - 1 ? total : len * (uint64_t)(i + 1)};
    qm_amp_input in = {.dtype = in_dt, .data = x, .n = n, .batch = batch};
    qm_state *s = NULL;
    if (qm_materialize_amplitude(mesh, q, out_dt, sh, k, &in, NULL, &s, st) != QM_OK)
        return NULL;
    void *amps = malloc(total * qm_dtype_size(out_dt));
    if (amps && qm_state_read(s, 0, total, out_dt, amps, st) != QM_OK) {
        free(amps);
        amps = NULL;
    }
    qm_state_destroy(s);
    return amps;
}

/* The real parts of n amplitudes as doubles. */
static double re(const void *amps, qm_dtype dt, uint64_t i)
{
    return dt == QM_DTYPE_COMPLEX128 ? ((const double *)amps)[2 * i]
                                     : (double)((const float *)amps)[2 * i];
}

static bool all_finite_normalized(const void *amps, qm_dtype dt, uint64_t n, double tol)
{
    long double s = 0;
    for (uint64_t i = 0; i < n; ++i) {
        const double a = re(amps, dt, i);
        const double b = dt == QM_DTYPE_COMPLEX128 ? ((const double *)amps)[2 * i + 1]
                                                   : (double)((const float *)amps)[2 * i + 1];
        if (!isfinite(a) || b != 0.0)
            return false;
        s += (long double)a * a;
    }
    if (fabsl(s - 1.0L) > tol)
        fprintf(stderr, "sum |psi|^2 - 1 = %Lg (tolerance %g)\n", s - 1.0L, tol);
    return fabsl(s - 1.0L) <= tol;
}

static void test_rescale_factor(void)
{
    /* every binade from the smallest subnormal to the largest normal: 2^-e with frexp's e,
     * capped at 2^1023 */
    for (int e2 = -1074; e2 <= 1023; ++e2)
        for (int m = 0; m < 3; ++m) {
            double v = ldexp(1.0, e2);
            if (m == 1)
                v = nextafter(ldexp(1.0, e2 + 1), 0.0); /* the top of the binade */
            if (m == 2 && e2 > -1074)
                v = ldexp(1.5, e2 - 1) + ldexp(1.0, e2 - 1) * 0.25;
            int ex;
            (void)frexp(v, &ex);
            const double want = ldexp(1.0, -ex > 1023 ? 1023 : -ex);
            if (qm_rescale_factor(v) != want)
                fprintf(stderr, "qm_rescale_factor(%a) = %a, want %a\n", v,
                        qm_rescale_factor(v), want);
            CHECK(qm_rescale_factor(v) == want);
            const double sv = v * want; /* the largest scaled value: normal, in [2^-51, 1) */
            CHECK(sv >= 0x1p-51 && sv < 1.0);
        }
    CHECK(qm_rescale_factor(DBL_TRUE_MIN) == 0x1p1023);
    CHECK(qm_rescale_factor(DBL_MAX) == 0x1p-1024);
    CHECK(qm_rescale_factor(1.0) == 0.5);
    for (int e = -1074; e <= 1023; ++e)
        CHECK(qm_pow2(e) == ldexp(1.0, e));
}

/* 4 equal values give 0.5 exactly; [v, 0, 0, v] gives the bytes of [1, 0, 0, 1]. */
static void test_equal_values(void)
{
    qm_status st;
    const double d[] = {DBL_TRUE_MIN, -DBL_TRUE_MIN, 3 * DBL_TRUE_MIN, DBL_MIN, DBL_MAX, -DBL_MAX,
                        0x1p-1060, 1e-310, 1e300};
    const float f[] = {FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN, FLT_MAX, -FLT_MAX, 1e-40f};
    for (int dt = 0; dt < 2; ++dt) {
        const qm_dtype out = dt ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128;
        for (size_t i = 0; i < sizeof d / sizeof d[0] + sizeof f / sizeof f[0]; ++i) {
            const bool f32 = i >= sizeof d / sizeof d[0];
            const double v = f32 ? (double)f[i - sizeof d / sizeof d[0]] : d[i];
            double x4[4] = {v, v, v, v}, x2[4] = {v, 0, 0, v}, one[4] = {1, 0, 0, 1};
            float f4[4], f2[4], fone[4];
            for (int j = 0; j < 4; ++j) {
                f4[j] = (float)x4[j];
                f2[j] = (float)x2[j];
                fone[j] = (float)one[j];
            }
            const qm_dtype in_dt = f32 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64;
            for (int k = 1; k <= 4; k *= 2) {
                void *a = encode(f32 ? (void *)f4 : (void *)x4, in_dt, 4, 0, 2, out, k, &st);
                CHECK(a != NULL);
                if (!a)
                    continue;
                bool ok = true;
                for (int j = 0; j < 4; ++j)
                    ok = ok && re(a, out, (uint64_t)j) == (v > 0 ? 0.5 : -0.5);
                if (!ok)
                    fprintf(stderr, "4 x %a (%s) -> %s: %a, not 0.5\n", v, f32 ? "float32" : "float64",
                            qm_dtype_name(out), re(a, out, 0));
                CHECK(ok);
                free(a);
                /* with padding: 4 values into 3 qubits */
                void *b = encode(f32 ? (void *)f2 : (void *)x2, in_dt, 4, 0, 3, out, k, &st);
                void *r = encode(f32 ? (void *)fone : (void *)one, in_dt, 4, 0, 3, out, k, &st);
                CHECK(b && r);
                if (b && r) {
                    /* 1/sqrt(2) itself for powers of two; within 2 ulp otherwise (v * c
                     * with c = 1 / sqrt(2 v^2) rounds three times) */
                    const double w = v > 0 ? re(r, out, 0) : -re(r, out, 0), a0 = re(b, out, 0);
                    const double ulp = out == QM_DTYPE_COMPLEX128 ? 0x1p-53 : 0x1p-24;
                    int ex;
                    const bool pow2 = frexp(fabs(v), &ex) == 0.5;
                    const bool near = pow2 ? a0 == w : fabs(a0 - w) <= 2 * ulp;
                    if (!near || re(b, out, 3) != a0)
                        fprintf(stderr, "[%a, 0, 0, %a] -> %s: %a, %a; [1, 0, 0, 1]: %a\n", v, v,
                                qm_dtype_name(out), a0, re(b, out, 3), w);
                    CHECK(near && re(b, out, 3) == a0);
                    CHECK(re(b, out, 1) == 0.0 && re(b, out, 5) == 0.0 && re(b, out, 7) == 0.0);
                }
                free(b);
                free(r);
            }
        }
    }
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* x * 2^k encodes to the bytes of x, for integers |x| < 1024 (so x * 2^k is exact for
 * -1074 <= k <= 1013, float64; -149 <= k <= 117, float32), single states over 1, 3 and 8 shards
 * and whole batches (the fused path at 10 qubits, one state a shard-sized page at 15). */
static void test_scale_invariance(void)
{
    qm_status st;
    const int k64[] = {-1074, -1073, -1070, -1064, -1050, -1030, -1024, -1023, -1022, -1000,
                       -800, -600, -520, -490, -300, 0, 300, 500, 511, 512, 600, 900, 1000, 1013};
    const int k32[] = {-149, -140, -130, -126, -100, -60, 0, 60, 100, 117};
    const unsigned qs[] = {4, 10, 15};
    for (size_t qi = 0; qi < 3; ++qi) {
        const unsigned q = qs[qi];
        const uint64_t n = ((uint64_t)1 << q) - 3;
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        float *xf = malloc(n * sizeof *xf), *yf = malloc(n * sizeof *yf);
        for (uint64_t i = 0; i < n; ++i) {
            x[i] = (double)((int)(next_rand() % 2047) - 1023);
            xf[i] = (float)x[i];
        }
        x[n / 2] = 1023; /* a known largest magnitude */
        xf[n / 2] = 1023;
        for (int f32 = 0; f32 < 2; ++f32) {
            const int *ks = f32 ? k32 : k64;
            const size_t nk = f32 ? sizeof k32 / sizeof k32[0] : sizeof k64 / sizeof k64[0];
            const qm_dtype in_dt = f32 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64;
            for (int o = 0; o < 2; ++o) {
                const qm_dtype out = o ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128;
                const uint64_t bytes = qm_dtype_size(out) << q;
                void *ref = encode(f32 ? (void *)xf : (void *)x, in_dt, n, 0, q, out, 1, &st);
                CHECK(ref != NULL);
                for (size_t ki = 0; ref && ki < nk; ++ki) {
                    for (uint64_t i = 0; i < n; ++i) {
                        y[i] = ldexp(x[i], ks[ki]);
                        yf[i] = ldexpf(xf[i], ks[ki]);
                    }
                    for (int k = 1; k <= 8; k = k == 1 ? 3 : k + 5) {
                        void *a = encode(f32 ? (void *)yf : (void *)y, in_dt, n, 0, q, out, k, &st);
                        CHECK(a != NULL);
                        const bool same = a && memcmp(a, ref, bytes) == 0;
                        if (!same)
                            fprintf(stderr, "q=%u %s -> %s, x * 2^%d over %d shards: bytes differ "
                                    "from x's (%s)\n", q, f32 ? "float32" : "float64",
                                    qm_dtype_name(out), ks[ki], k, a ? "amplitudes" : st.msg);
                        CHECK(same);
                        free(a);
                    }
                }
                /* a batch of 5 states: x * 2^k for five different k (slow and fast states
                 * side by side; the fused kernel at q <= 14) over 1 and 5 shards */
                if (ref) {
                    const int kb[5] = {f32 ? -149 : -1074, 0, f32 ? 117 : 1013, f32 ? -130 : -1022,
                                       f32 ? 60 : -600};
                    double *bx = malloc(5 * n * sizeof *bx);
                    float *bf = malloc(5 * n * sizeof *bf);
                    for (int s = 0; s < 5; ++s)
                        for (uint64_t i = 0; i < n; ++i) {
                            bx[(uint64_t)s * n + i] = ldexp(x[i], kb[s]);
                            bf[(uint64_t)s * n + i] = ldexpf(xf[i], kb[s]);
                        }
                    for (int k = 1; k <= 5; k += 4) {
                        void *a = encode(f32 ? (void *)bf : (void *)bx, in_dt, n, 5, q, out, k, &st);
                        CHECK(a != NULL);
                        for (int s = 0; a && s < 5; ++s) {
                            const bool same = memcmp((char *)a + (uint64_t)s * bytes, ref, bytes) == 0;
                            if (!same)
                                fprintf(stderr, "q=%u %s -> %s batch state %d (x * 2^%d) over %d "
                                        "shards: bytes differ from x's\n", q,
                                        f32 ? "float32" : "float64", qm_dtype_name(out), s, kb[s], k);
                            CHECK(same);
                        }
                        free(a);
                    }
                    free(bx);
                    free(bf);
                }
                free(ref);
            }
        }
        free(x);
        free(y);
        free(xf);
        free(yf);
    }
}

/* Random values over the whole float64 range (random exponents from subnormal to near
 * DBL_MAX, in windows of every width): the state is finite and normalized. */
static void test_random_ranges(void)
{
    qm_status st;
    const unsigned q = 12;
    const uint64_t n = 4000;
    double *x = malloc(n * sizeof *x);
    const int lo[] = {-1074, -1074, -1074, -1100, -1030, -700, 900, 1000, -1074};
    const int hi[] = {-1060, -1023, -900, -1000, -1020, -500, 1023, 1023, 1023};
    for (size_t w = 0; w < sizeof lo / sizeof lo[0]; ++w) {
        for (uint64_t i = 0; i < n; ++i) {
            const int e = lo[w] + (int)(next_rand() % (uint64_t)(hi[w] - lo[w] + 1));
            const double m = 1.0 + (double)(next_rand() >> 12) * 0x1p-52; /* [1, 2) */
            x[i] = ldexp(next_rand() & 1 ? m : -m, e > 1023 ? 1023 : e);
        }
        for (int o = 0; o < 2; ++o) {
            const qm_dtype out = o ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128;
            const double tol = (o ? 0x1p-24 : 0x1p-53) * 64.0;
            void *a1 = encode(x, QM_DTYPE_FLOAT64, n, 0, q, out, 1, &st);
            void *a8 = encode(x, QM_DTYPE_FLOAT64, n, 0, q, out, 8, &st);
            CHECK(a1 && a8);
            if (a1 && a8) {
                CHECK(all_finite_normalized(a1, out, (uint64_t)1 << q, tol));
                CHECK(memcmp(a1, a8, qm_dtype_size(out) << q) == 0); /* layout-independent */
            }
            free(a1);
            free(a8);
        }
    }
    /* one smallest subnormal among normal values: fast path; its amplitude rounds to 0 */
    const double mix[4] = {DBL_TRUE_MIN, 3.0, 0.0, 4.0};
    double *a = encode(mix, QM_DTYPE_FLOAT64, 4, 0, 2, QM_DTYPE_COMPLEX128, 2, &st);
    const double c5 = 1.0 / sqrt(25.0);
    CHECK(a && a[0] == 0.0 && a[2] == 3.0 * c5 && a[4] == 0.0 && a[6] == 4.0 * c5);
    free(a);
    /* one normal value among subnormals: slow path, the normal value dominates */
    const double mix2[4] = {DBL_TRUE_MIN, DBL_MIN, -DBL_TRUE_MIN, 0x1p-1073};
    a = encode(mix2, QM_DTYPE_FLOAT64, 4, 0, 2, QM_DTYPE_COMPLEX128, 4, &st);
    CHECK(a && a[2] == 1.0 && a[0] == 0x1p-52 && a[4] == -0x1p-52 && a[6] == 0x1p-51);
    free(a);
    free(x);
}

/* qm_hal_amp_scale with per-state scales (the slow path's powers of two, kept apart from the
 * coefficients): three states of period 4, 3 values each; from input and from the stash;
 * complex128 and complex64; NULL scales = 1. */
static void test_amp_scale_scales(void)
{
    qm_status st;
    const double x[9] = {DBL_TRUE_MIN, 2 * DBL_TRUE_MIN, -DBL_TRUE_MIN, 3.0, 4.0, 0.0,
                         DBL_MAX, -DBL_MAX, 0x1p1000};
    const double scales[3] = {0x1p1023, 1.0, 0x1p-1024};
    const double coeffs[3] = {0x1p50, 0.2, 0.5};
    const double want[12] = {0x1p-1, 0x1p0, -0x1p-1, 0, 3.0 * 0.2, 4.0 * 0.2, 0, 0,
                             DBL_MAX * 0x1p-1024 * 0.5, -DBL_MAX * 0x1p-1024 * 0.5, 0x1p-25, 0};
    qm_hal_buf *in = NULL, *state = NULL;
    CHECK_OK(qm_hal_buf_alloc(mesh, 0, sizeof x, &in, &st));
    CHECK_OK(qm_hal_buf_alloc(mesh, 0, 12 * 16, &state, &st));
    if (!in || !state)
        return;
    CHECK_OK(qm_hal_copy_h2d(mesh, in, 0, x, sizeof x, NULL, &st));
    for (int v = 0; v < 4; ++v) {
        const qm_dtype dt = v & 1 ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128;
        const bool stash = (v & 2) != 0;
        if (stash) {
            const qm_hal_stash_args sa = {.out = state, .out_dtype = dt, .slot_g0 = 0, .period = 4,
                                          .period_valid = 3, .in = in,
                                          .in_dtype = QM_DTYPE_FLOAT64, .n = 9};
            CHECK_OK(qm_hal_stash(mesh, &sa, NULL, &st));
        }
        const qm_hal_amp_scale_args a = {.state = state, .state_dtype = dt, .n = 12, .period = 4,
                                         .period_valid = 3, .n_coeffs = 3, .coeffs = coeffs,
                                         .input = stash ? NULL : in,
                                         .in_dtype = QM_DTYPE_FLOAT64, .scales = scales};
        CHECK_OK(qm_hal_amp_scale(mesh, &a, NULL, &st));
        double got[24];
        CHECK_OK(qm_hal_copy_d2h(mesh, got, state, 0, 12 * qm_dtype_size(dt), NULL, &st));
        bool ok = true;
        for (int i = 0; i < 12; ++i)
            ok = ok && re(got, dt, (uint64_t)i) ==
                           (dt == QM_DTYPE_COMPLEX128 ? want[i] : (double)(float)want[i]);
        if (!ok)
            fprintf(stderr, "amp_scale with scales, %s from %s: wrong amplitudes\n",
                    qm_dtype_name(dt), stash ? "the stash" : "input");
        CHECK(ok);
    }
    /* NULL scales: x * coeff */
    const qm_hal_amp_scale_args a = {.state = state, .state_dtype = QM_DTYPE_COMPLEX128, .n = 4,
                                     .period = 4, .period_valid = 3, .n_coeffs = 1,
                                     .coeffs = coeffs + 1, .input = in,
                                     .in_dtype = QM_DTYPE_FLOAT64, .in_first = 0};
    CHECK_OK(qm_hal_amp_scale(mesh, &a, NULL, &st));
    double got[8];
    CHECK_OK(qm_hal_copy_d2h(mesh, got, state, 0, sizeof got, NULL, &st));
    CHECK(got[0] == DBL_TRUE_MIN * 0.2 && got[2] == 2 * DBL_TRUE_MIN * 0.2 && got[6] == 0.0);
    qm_hal_buf_free(mesh, in);
    qm_hal_buf_free(mesh, state);
}

/* Write a 1-d .npy of n values (descr '<f8' or '<f4'). */
static bool write_npy(const char *path, const void *x, uint64_t n, bool f64)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    char hdr[118];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,), }",
                       f64 ? "<f8" : "<f4", (unsigned long long)n);
    while ((10 + len + 1) % 64 != 0)
        hdr[len++] = ' ';
    hdr[len++] = '\n';
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)len, 0};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len &&
              fwrite(x, f64 ? 8 : 4, (size_t)n, f) == n;
    return fclose(f) == 0 && ok;
}

/* The data of a complex .npy (header skipped), n_bytes long. */
static bool read_npy_data(const char *path, void *out, size_t n_bytes)
{
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    bool ok = f && fread(pre, 1, 10, f) == 10 &&
              fseek(f, 10 + (long)(pre[8] | pre[9] << 8), SEEK_SET) == 0 &&
              fread(out, 1, n_bytes, f) == n_bytes && fgetc(f) == EOF;
    if (f)
        fclose(f);
    return ok;
}

static void test_cli(const char *qmesh)
{
    char dir[] = "/tmp/qm_numerics_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    const double d4[4] = {DBL_TRUE_MIN, DBL_TRUE_MIN, DBL_TRUE_MIN, DBL_TRUE_MIN};
    const double m4[4] = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
    const float f4[4] = {FLT_TRUE_MIN, FLT_TRUE_MIN, FLT_TRUE_MIN, FLT_TRUE_MIN};
    const float g4[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
    const struct {
        const char *name;
        const void *x;
        bool f64;
        const char *extra;
    } cases[] = {{"sub", d4, true, ""}, {"max", m4, true, ""}, {"fsub", f4, false, ""},
                 {"fmax", g4, false, ""}, {"sub64", d4, true, " --dtype complex64"},
                 {"fsub128", f4, false, " --dtype complex128"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        char in[256], out[256], cmd[1024], text[8192];
        snprintf(in, sizeof in, "%s/%s.npy", dir, cases[c].name);
        snprintf(out, sizeof out, "%s/o_%s.npy", dir, cases[c].name);
        CHECK(write_npy(in, cases[c].x, 4, cases[c].f64));
        snprintf(cmd, sizeof cmd, "%s encode --input %s --out %s%s 2>&1", qmesh, in, out,
                 cases[c].extra);
        const int rc = qm_test_run(cmd, text, sizeof text);
        if (rc != 0 || !strstr(text, "norm:     max |sum |psi|^2 - 1| = 0.000e+00"))
            fprintf(stderr, "%s: exit %d\n%s\n", cmd, rc, text);
        CHECK(rc == 0);
        CHECK(strstr(text, "norm:     max |sum |psi|^2 - 1| = 0.000e+00 over 1 state") != NULL);
        const bool c128 = cases[c].f64 ? !strstr(cases[c].extra, "complex64")
                                       : strstr(cases[c].extra, "complex128") != NULL;
        double amps[8];
        float famps[8];
        CHECK(read_npy_data(out, c128 ? (void *)amps : (void *)famps, c128 ? 64 : 32));
        for (int i = 0; i < 4; ++i) {
            CHECK(c128 ? amps[2 * i] == 0.5 && amps[2 * i + 1] == 0.0
                       : famps[2 * i] == 0.5f && famps[2 * i + 1] == 0.0f);
        }
        unlink(in);
        unlink(out);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    qm_status st;
    CHECK_OK(fixture_mesh(8, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &mesh, &st));
    if (!mesh)
        return qm_test_end("test_numerics");
    test_rescale_factor();
    test_equal_values();
    test_scale_invariance();
    test_random_ranges();
    test_amp_scale_scales();
    if (argc > 1)
        test_cli(argv[1]);
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh), 0);
    qm_hal_destroy(mesh);
    return qm_test_end("test_numerics");
}
