/* test_cuda_batch.c — the fused batch kernel (qm_hal_amp_batch) on the CUDA backend writes the
 * same bytes as the CPU reference (the simulated backend): every period 1..2^14, values per state
 * from 1 to the period, float32/float64 input into complex64/complex128 states, misaligned input,
 * state and sums offsets, fast-path and slow-path states (zeros, NaN, an overflowing and an
 * underflowing sum) whose slots must hold the stash with padding slots untouched, and the
 * 65536 x 1021 -> 10 qubits batch. Outputs are poisoned (0xFF) first on both backends. Sums are
 * compared bit for bit, except that two NaN sums count as equal (NaN payloads are not part of
 * the contract, and the GPU's arithmetic may not propagate them as the CPU's does). Exit 77
 * without a GPU. */
#include "cuda_backend.h"
#include "qm_math.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define POISON 0xFF

typedef struct combo {
    qm_dtype in_dt, st_dt;
    const char *name;
    uint64_t cases, states, slow, nan_sums;
} combo;

typedef struct batch_case {
    unsigned q;
    uint64_t F, n, in_off, st_off, sums_off;
} batch_case;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t xorshift(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
/* uniform in [-1, 1) */
static double uniform(void) { return (double)(xorshift() >> 11) * 0x1p-52 - 1.0; }

static double bits_f64(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Input of state k, value i. States 0..4 and n-1 are special (when n >= 6): 0 all +0, 1 NaNs
 * (quiet and signalling, with payloads), 2 a sum that overflows (float64: 1e200 values; float32:
 * one +inf), 3 float64: 1e-170 values (the squares underflow to 0), float32: subnormal values,
 * 4 float64: 2^-485 values (the sum F * 2^-970 is on either side of QM_FAST_SUM_MIN), float32:
 * 1e38 values, n-1 all -0; when n >= 8 also 5 all subnormal (float64: multiples of the smallest
 * subnormal, the sum is 0; float32: of FLT_TRUE_MIN) and 6 near the largest finite value
 * (float64: DBL_MAX * r, the sum overflows; float32: FLT_MAX * r). */
static double value(uint64_t k, uint64_t i, uint64_t n, uint64_t F, bool f64)
{
    const double r = uniform();
    if (n >= 6) {
        if (k == 0)
            return 0.0;
        if (k == n - 1)
            return -0.0;
        if (k == 1 && i == 0)
            return NAN;
        if (k == 1 && i == F / 2)
            return f64 ? bits_f64(0xfff0000000000123ull) : (double)bits_f32(0xff800123u);
        if (k == 2)
            return f64 ? copysign(1e200, r) : i == F - 1 ? (double)INFINITY : r;
        if (k == 3)
            return f64 ? copysign(1e-170, r) : (double)(float)(r * 1e-40);
        if (k == 4)
            return f64 ? copysign(0x1p-485, r) : 1e38 * r;
        if (k == 5 && n >= 8)
            return f64 ? copysign(DBL_TRUE_MIN * (double)(1 + i % 5), r)
                       : (double)copysignf(FLT_TRUE_MIN * (float)(1 + i % 5), (float)r);
        if (k == 6 && n >= 8)
            return f64 ? DBL_MAX * r : (double)(FLT_MAX * (float)r);
    }
    return r * ldexp(1.0, (int)(k % 41) - 20);
}

static void fill_input(void *in, const batch_case *c, bool f64)
{
    for (uint64_t k = 0; k < c->n; ++k)
        for (uint64_t i = 0; i < c->F; ++i) {
            const uint64_t e = c->in_off + k * c->F + i;
            const double v = value(k, i, c->n, c->F, f64);
            if (f64)
                ((double *)in)[e] = v;
            else /* NaN bits set directly: a double -> float conversion would quiet them */
                ((float *)in)[e] = k == 1 && i == c->F / 2 && c->n >= 6 ? bits_f32(0xff800123u)
                                                                       : (float)v;
        }
}

typedef struct backend_bufs {
    qm_hal_buf *in, *state, *sums;
} backend_bufs;

/* Allocate, upload the input, poison the outputs, run amp_batch (on `stream` when given, then
 * sync), download state and sums. */
static bool run_batch(qm_hal *hal, const combo *cb, const batch_case *c, const void *in,
                      uint64_t in_bytes, const void *poison, uint64_t st_bytes,
                      uint64_t sums_bytes, void *st_out, double *sums_out, bool use_stream)
{
    qm_status st;
    backend_bufs b = {0};
    qm_hal_stream *s = NULL;
    bool ok = qm_hal_buf_alloc(hal, 0, in_bytes, &b.in, &st) == QM_OK &&
              qm_hal_buf_alloc(hal, 0, st_bytes, &b.state, &st) == QM_OK &&
              qm_hal_buf_alloc(hal, 0, sums_bytes, &b.sums, &st) == QM_OK &&
              qm_hal_copy_h2d(hal, b.in, 0, in, in_bytes, NULL, &st) == QM_OK &&
              qm_hal_copy_h2d(hal, b.state, 0, poison, st_bytes, NULL, &st) == QM_OK &&
              qm_hal_copy_h2d(hal, b.sums, 0, poison, sums_bytes, NULL, &st) == QM_OK &&
              (!use_stream || qm_hal_stream_create(hal, 0, &s, &st) == QM_OK);
    if (ok) {
        const qm_hal_amp_batch_args a = {.state = b.state, .state_dtype = cb->st_dt,
                                         .off = c->st_off, .period = (uint64_t)1 << c->q,
                                         .period_valid = c->F, .n_states = c->n, .input = b.in,
                                         .in_dtype = cb->in_dt, .in_off = c->in_off,
                                         .sums = b.sums, .sums_off = c->sums_off};
        ok = qm_hal_amp_batch(hal, &a, s, &st) == QM_OK &&
             (!s || qm_hal_stream_sync(hal, s, &st) == QM_OK) &&
             qm_hal_copy_d2h(hal, st_out, b.state, 0, st_bytes, NULL, &st) == QM_OK &&
             qm_hal_copy_d2h(hal, sums_out, b.sums, 0, sums_bytes, NULL, &st) == QM_OK;
    }
    if (!ok)
        fprintf(stderr, "%s backend: %s\n", qm_hal_kind_name(qm_hal_kind_get(hal)), st.msg);
    qm_hal_stream_destroy(hal, s);
    qm_hal_buf_free(hal, b.in);
    qm_hal_buf_free(hal, b.state);
    qm_hal_buf_free(hal, b.sums);
    return ok;
}

static bool is_poison(const void *p, uint64_t bytes)
{
    for (uint64_t i = 0; i < bytes; ++i)
        if (((const unsigned char *)p)[i] != POISON)
            return false;
    return true;
}

/* Slow-path state k of the reference output: data slots hold the stash, padding slots poison. */
static bool stash_ok(const void *in, const unsigned char *state, const combo *cb,
                     const batch_case *c, uint64_t k)
{
    const bool f64 = cb->in_dt == QM_DTYPE_FLOAT64, c128 = cb->st_dt == QM_DTYPE_COMPLEX128;
    const uint64_t P = (uint64_t)1 << c->q, ss = c128 ? 16 : 8;
    const unsigned char *slots = state + (c->st_off + k * P) * ss;
    for (uint64_t i = 0; i < c->F; ++i) {
        const uint64_t e = c->in_off + k * c->F + i;
        const double x = f64 ? ((const double *)in)[e] : (double)((const float *)in)[e];
        const double im = 0.0;
        if (memcmp(slots + i * ss, &x, 8) != 0 || (c128 && memcmp(slots + i * ss + 8, &im, 8) != 0))
            return false;
    }
    return is_poison(slots + c->F * ss, (P - c->F) * ss);
}

static bool same_sum(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static void run_case(qm_hal *gpu, qm_hal *sim, combo *cb, const batch_case *c, bool use_stream)
{
    const bool f64 = cb->in_dt == QM_DTYPE_FLOAT64;
    const uint64_t P = (uint64_t)1 << c->q, is = f64 ? 8 : 4;
    const uint64_t ss = cb->st_dt == QM_DTYPE_COMPLEX128 ? 16 : 8;
    const uint64_t in_bytes = (c->in_off + c->n * c->F) * is;
    const uint64_t st_bytes = (c->st_off + c->n * P + 2) * ss; /* 2 guard slots at the end */
    const uint64_t n_sums = c->sums_off + c->n + 1, sums_bytes = n_sums * 8;
    void *in = malloc(in_bytes);
    unsigned char *poison = malloc(st_bytes > sums_bytes ? st_bytes : sums_bytes);
    unsigned char *gs = malloc(st_bytes), *ref = malloc(st_bytes);
    double *gsum = malloc(sums_bytes), *rsum = malloc(sums_bytes);
    CHECK(in && poison && gs && ref && gsum && rsum);
    if (!in || !poison || !gs || !ref || !gsum || !rsum)
        goto done;
    memset(in, 0, in_bytes);
    fill_input(in, c, f64);
    memset(poison, POISON, st_bytes > sums_bytes ? st_bytes : sums_bytes);
    const bool ran = run_batch(gpu, cb, c, in, in_bytes, poison, st_bytes, sums_bytes, gs, gsum,
                               use_stream) &&
                     run_batch(sim, cb, c, in, in_bytes, poison, st_bytes, sums_bytes, ref, rsum,
                               false);
    CHECK(ran);
    if (!ran)
        goto done;
    /* the state bytes, poison around them included */
    bool same = memcmp(gs, ref, st_bytes) == 0;
    if (!same) {
        uint64_t b = 0;
        while (gs[b] == ref[b])
            ++b;
        const uint64_t slot = b / ss - c->st_off;
        fprintf(stderr, "%s q=%u F=%llu n=%llu in_off=%llu st_off=%llu: first difference at "
                        "state %llu slot %llu (byte %llu)\n",
                cb->name, c->q, (unsigned long long)c->F, (unsigned long long)c->n,
                (unsigned long long)c->in_off, (unsigned long long)c->st_off,
                (unsigned long long)(slot / P), (unsigned long long)(slot % P),
                (unsigned long long)(b % ss));
    }
    CHECK(same);
    CHECK(is_poison(ref, c->st_off * ss) && is_poison(ref + (c->st_off + c->n * P) * ss, 2 * ss));
    /* the sums, poison around them included */
    bool sums_same = is_poison(gsum, c->sums_off * 8) && is_poison(gsum + c->sums_off + c->n, 8);
    for (uint64_t k = 0; k < c->n; ++k) {
        const double a = gsum[c->sums_off + k], r = rsum[c->sums_off + k];
        if (!same_sum(a, r)) {
            if (sums_same)
                fprintf(stderr, "%s q=%u F=%llu: sums[%llu] %a (cuda) != %a (cpu)\n", cb->name,
                        c->q, (unsigned long long)c->F, (unsigned long long)k, a, r);
            sums_same = false;
        }
        if (isnan(a) && isnan(r) && memcmp(&a, &r, sizeof a) != 0)
            cb->nan_sums++;
    }
    CHECK(sums_same);
    /* slow-path states: the stash, padding untouched; the special states are slow */
    for (uint64_t k = 0; k < c->n; ++k) {
        const double sum = rsum[c->sums_off + k];
        const bool slow = !(isfinite(sum) && sum >= QM_FAST_SUM_MIN);
        const bool special = c->n >= 6 && (k <= 2 || k == c->n - 1 || (f64 && k == 3) ||
                                           (f64 && c->n >= 8 && (k == 5 || k == 6)));
        if (special)
            CHECK(slow);
        if (!slow)
            continue;
        cb->slow++;
        CHECK(stash_ok(in, ref, cb, c, k));
    }
    cb->cases++;
    cb->states += c->n;
done:
    free(in);
    free(poison);
    free(gs);
    free(ref);
    free(gsum);
    free(rsum);
}

int main(void)
{
    qm_status st;
    qm_hal *gpu = NULL, *sim = NULL;
    if (qm_hal_cuda_open(&gpu, &st) != QM_OK) {
        printf("test_cuda_batch: skipped: %s\n", st.msg);
        CHECK(st.code == QM_E_UNSUPPORTED);
        return qm_test_failures ? 1 : 77;
    }
    CHECK_OK(fixture_mesh(1, (uint64_t)4 << 30, false, QM_SIM_MATERIALIZED, &sim, &st));
    combo combos[4] = {
        {QM_DTYPE_FLOAT64, QM_DTYPE_COMPLEX128, "float64->complex128", 0, 0, 0, 0},
        {QM_DTYPE_FLOAT32, QM_DTYPE_COMPLEX64, "float32->complex64", 0, 0, 0, 0},
        {QM_DTYPE_FLOAT32, QM_DTYPE_COMPLEX128, "float32->complex128", 0, 0, 0, 0},
        {QM_DTYPE_FLOAT64, QM_DTYPE_COMPLEX64, "float64->complex64", 0, 0, 0, 0},
    };
    const unsigned qs[] = {0, 1, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14};
    unsigned variant = 0;
    for (int ci = 0; ci < 4 && sim; ++ci)
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; ++qi) {
            const unsigned q = qs[qi];
            const uint64_t P = (uint64_t)1 << q;
            const uint64_t Fs[] = {1, 3, 7, 8, 9, P - 3, P};
            for (size_t fi = 0; fi < sizeof Fs / sizeof Fs[0]; ++fi) {
                const uint64_t F = Fs[fi];
                bool seen = F < 1 || F > P; /* P - 3 wraps for P < 3 */
                for (size_t fj = 0; fj < fi; ++fj)
                    seen = seen || Fs[fj] == F;
                if (seen)
                    continue;
                ++variant;
                /* more states than resident blocks for the small periods; odd counts leave a
                 * partial last tile; odd input offsets misalign every sample; an odd state
                 * offset misaligns complex64 pairs for 16-byte stores */
                const uint64_t base = ((uint64_t)1 << 18) >> q, n = (base > 7 ? base : 7) + 3;
                const batch_case c = {q, F, n, variant % 2 ? 1 : 3, variant % 3 == 0 ? 1 : 0,
                                      variant % 4};
                run_case(gpu, sim, &combos[ci], &c, variant % 5 == 0);
            }
        }
    /* the benchmark's workload: 65536 samples of 1021 features into 10 qubits */
    for (int ci = 0; ci < 2 && sim; ++ci) {
        const batch_case big = {10, 1021, 65536, 3, 0, 1};
        run_case(gpu, sim, &combos[ci], &big, ci == 1);
    }
    for (int ci = 0; ci < 4; ++ci)
        printf("test_cuda_batch: %s: %llu cases, %llu states (%llu slow path), %s; %llu NaN sums "
               "with other NaN bits than the CPU's\n",
               combos[ci].name, (unsigned long long)combos[ci].cases,
               (unsigned long long)combos[ci].states, (unsigned long long)combos[ci].slow,
               qm_test_failures ? "see failures above" : "bytes equal",
               (unsigned long long)combos[ci].nan_sums);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
    CHECK_EQ_U64(qm_hal_bytes_in_use(sim), 0);
    qm_hal_destroy(sim);
    qm_hal_destroy(gpu);
    return qm_test_end("test_cuda_batch");
}
