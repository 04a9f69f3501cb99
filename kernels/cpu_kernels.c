/* cpu_kernels.c — see cpu_kernels.h. OpenMP appears here and in hal/sim only.
 *
 * A kernel call is at most one parallel region (wht: one per butterfly stage above its chunks),
 * and no region is entered inside another. stash and amp_scale are a serial body over a part of
 * their range (stash_part, amp_scale_part) run either once over the whole range (below
 * QM_OMP_MIN_ELEMS elements: no region at all) or by a `parallel for schedule(static)` over fixed
 * parts of QM_CPU_PART elements; amp_batch is one region over its states whose body calls the
 * serial parts (stash_part, scale_part); sumsq_blocks, product and iqp_phase are one region over
 * their blocks, with an `if` clause that keeps small ranges on one thread. (A region per sample —
 * the `parallel for if (0)` that scale_segment used to enter inside the loop over states — cost a
 * batch of 65536 small states 65536 team set-ups: issue 17.) Every element is computed on its
 * own, so the parts and the thread count change no bit; a build without OpenMP computes the same
 * results serially.
 * First touch: simulated device memory is not written when allocated (hal/sim), so the pages of a
 * state are first written by the thread that computes them, in the static schedule of the kernel
 * that writes the state first (stash, amp_batch or amp_scale: each gives every thread one contiguous
 * share of about 1/T of the range, in index order).
 */
#include "cpu_kernels.h"
#include "qm_math.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h> /* non-temporal stores (QM_CPU_STREAM_BYTES) */
#define QM_CPU_NT 1
#else
#define QM_CPU_NT 0
#endif

#define QM_OMP_MIN_ELEMS 65536
#define QM_CPU_PART 8192 /* elements per scheduled part of a parallel kernel */
/* A kernel call that writes at least this many bytes of amplitudes from its input streams them
 * past the caches (non-temporal stores, x86-64): they would not stay cached anyway, and a normal
 * store first reads each line it writes (read for ownership), which costs a state's bytes once
 * more. Smaller outputs stay in the caches for whoever reads them next. */
#define QM_CPU_STREAM_BYTES ((uint64_t)32 << 20)

/* A stashed value lives in the first 8 bytes of its slot. */
static uint64_t stride_of(qmk_elem state_elem) { return state_elem == QMK_C128 ? 2 : 1; }

/* Input elements [i0, i1) of a stash (serial). */
static void stash_part(void *state, qmk_elem state_elem, uint64_t slot_g0, uint64_t period,
                       uint64_t period_valid, const void *in, qmk_elem in_elem, uint64_t in_off,
                       uint64_t in_first, uint64_t i0, uint64_t i1)
{
    const uint64_t k = stride_of(state_elem);
    /* runs of values that belong to one state are contiguous in both input and slots */
    for (uint64_t i = i0; i < i1;) {
        const uint64_t e = in_first + i, sidx = e / period_valid, local = e % period_valid;
        const uint64_t run = period_valid - local < i1 - i ? period_valid - local : i1 - i;
        double *o = (double *)state + (sidx * period + local - slot_g0) * k;
        if (in_elem == QMK_F64) {
            const double *x = (const double *)in + in_off + i;
            if (k == 1) {
                memcpy(o, x, (size_t)run * sizeof *o);
            } else {
                for (uint64_t j = 0; j < run; ++j) {
                    o[2 * j] = x[j];
                    o[2 * j + 1] = 0.0;
                }
            }
        } else {
            const float *x = (const float *)in + in_off + i;
            for (uint64_t j = 0; j < run; ++j) {
                o[k * j] = (double)x[j];
                if (k == 2)
                    o[2 * j + 1] = 0.0;
            }
        }
        i += run;
    }
}

void qm_cpu_stash(void *state, qmk_elem state_elem, uint64_t slot_g0, uint64_t period,
                  uint64_t period_valid, const void *in, qmk_elem in_elem, uint64_t in_off,
                  uint64_t in_first, uint64_t n)
{
    if (n < QM_OMP_MIN_ELEMS) {
        stash_part(state, state_elem, slot_g0, period, period_valid, in, in_elem, in_off, in_first,
                   0, n);
        return;
    }
    const int64_t np = (int64_t)((n + QM_CPU_PART - 1) / QM_CPU_PART);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; ++p) {
        const uint64_t i0 = (uint64_t)p * QM_CPU_PART;
        stash_part(state, state_elem, slot_g0, period, period_valid, in, in_elem, in_off, in_first,
                   i0, n - i0 < QM_CPU_PART ? n : i0 + QM_CPU_PART);
    }
}

void qm_cpu_sumsq_blocks(const void *state, qmk_elem state_elem, uint64_t off, uint64_t g0,
                         uint64_t period, uint64_t period_valid, unsigned log2_block,
                         uint64_t n_blocks, double scale, double *out_sums, const void *in,
                         qmk_elem in_elem, uint64_t in_first)
{
    const uint64_t bs = (uint64_t)1 << log2_block, k = stride_of(state_elem);
    const int64_t nb = (int64_t)n_blocks;
    const int par = (n_blocks << log2_block) >= QM_OMP_MIN_ELEMS;
    (void)par; /* read only by the OpenMP if-clause */
    const double *x = state ? (const double *)state + off * k : NULL;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t b = 0; b < nb; ++b) {
        const uint64_t lo = (uint64_t)b * bs, gs = g0 + lo;
        const uint64_t valid = qm_block_valid(gs, bs, period, period_valid);
        if (!in) {
            out_sums[b] = qm_tree_sumsq(x + lo * k, k, valid, log2_block, scale);
            continue;
        }
        /* the block's data values are contiguous in the input */
        const uint64_t e = (gs / period) * period_valid + gs % period - in_first;
        out_sums[b] = valid == 0 ? 0.0
                      : in_elem == QMK_F64
                          ? qm_tree_sumsq((const double *)in + e, 1, valid, log2_block, scale)
                          : qm_tree_sumsq_f32((const float *)in + e, 1, valid, log2_block, scale);
    }
}

void qm_cpu_state_sumsq(const void *state, qmk_elem state_elem, uint64_t n, uint64_t g0,
                        unsigned log2_block, double *out_sums)
{
    if (n == 0)
        return;
    const uint64_t bs = (uint64_t)1 << log2_block, b0 = g0 >> log2_block;
    const int64_t nb = (int64_t)(((g0 + n - 1) >> log2_block) - b0 + 1);
    const int par = n >= QM_OMP_MIN_ELEMS;
    (void)par; /* read only by the OpenMP if-clause */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t b = 0; b < nb; ++b) {
        const uint64_t gs = (b0 + (uint64_t)b) << log2_block; /* the block's first global slot */
        const uint64_t a = gs > g0 ? gs : g0, e = gs + bs < g0 + n ? gs + bs : g0 + n;
        out_sums[b] = state_elem == QMK_C128
                          ? qm_tree_normsq_c128((const double *)state + 2 * (a - g0), a - gs,
                                                e - gs, log2_block)
                          : qm_tree_normsq_c64((const float *)state + 2 * (a - g0), a - gs,
                                               e - gs, log2_block);
    }
}

void qm_cpu_tree_combine(const double *in, uint64_t n_groups, unsigned log2_group, double *out)
{
    const uint64_t per = (uint64_t)1 << log2_group;
    const int par = n_groups * per >= QM_OMP_MIN_ELEMS;
    (void)par; /* read only by the OpenMP if-clause */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t j = 0; j < (int64_t)n_groups; ++j)
        out[j] = qm_tree_root(in + (uint64_t)j * per, per);
}

void qm_cpu_scan(const void *state, qmk_elem state_elem, uint64_t off, uint64_t n,
                 double *max_abs, uint64_t *first_nonfinite)
{
    /* Slow path only: serial, in index order, so "first" is well defined. */
    const uint64_t k = stride_of(state_elem);
    const double *x = (const double *)state + off * k;
    double m = 0.0;
    uint64_t first = UINT64_MAX;
    for (uint64_t i = 0; i < n; ++i) {
        double v = x[i * k];
        if (!isfinite(v)) {
            if (first == UINT64_MAX)
                first = i;
            continue;
        }
        v = fabs(v);
        if (v > m)
            m = v;
    }
    *max_abs = m;
    *first_nonfinite = first;
}

/* One amplitude (amp, 0) into slot i of a complex128 (o64) or complex64 (o32) state; when nt, a
 * non-temporal store (past the caches: no read for ownership of a line that is wholly written). */
static inline void put_amp(double *o64, float *o32, uint64_t i, double amp, int nt)
{
#if QM_CPU_NT
    if (nt) {
        if (o64) {
            _mm_stream_pd(o64 + 2 * i, _mm_set_pd(0.0, amp));
        } else {
            const float p[2] = {(float)amp, 0.0f};
            long long bits;
            memcpy(&bits, p, sizeof bits);
            _mm_stream_si64((long long *)(void *)(o32 + 2 * i), bits);
        }
        return;
    }
#endif
    (void)nt;
    if (o64) {
        o64[2 * i] = amp;
        o64[2 * i + 1] = 0.0;
    } else {
        o32[2 * i] = (float)amp;
        o32[2 * i + 1] = 0.0f;
    }
}

/* Slots [a, b) of one state (serial): [a, d) data, [d, b) padding. x (when not NULL) holds the
 * input values of the data slots, x[0] for slot a; otherwise the values are the stash. The
 * amplitude is qm_amp_scaled: (x * scale) * coeff, scale = 1 (exact) on the fast path. nt: the
 * amplitudes from the input are streamed (put_amp), then fenced. */
static void scale_part(void *state, qmk_elem state_elem, uint64_t off, uint64_t a, uint64_t d,
                       uint64_t b, double scale, double coeff, const void *x, qmk_elem in_elem,
                       int nt)
{
    double *o64 = state_elem == QMK_C128 ? (double *)state + 2 * off : NULL;
    float *o32 = state_elem == QMK_C128 ? NULL : (float *)state + 2 * off;
    if (!x && o64) {
        for (uint64_t i = a; i < d; ++i) {
            o64[2 * i] = qm_amp_scaled(o64[2 * i], scale, coeff);
            o64[2 * i + 1] = 0.0;
        }
    } else if (!x) {
        /* the slot's 8 bytes hold the stashed double; read it, write two floats */
        char *base = (char *)o32;
        for (uint64_t i = a; i < d; ++i) {
            double v;
            memcpy(&v, base + 8 * i, sizeof v);
            const float amp[2] = {(float)qm_amp_scaled(v, scale, coeff), 0.0f};
            memcpy(base + 8 * i, amp, sizeof amp);
        }
    } else if (in_elem == QMK_F64) {
        const double *xi = (const double *)x - a;
        for (uint64_t i = a; i < d; ++i)
            put_amp(o64, o32, i, qm_amp_scaled(xi[i], scale, coeff), nt);
    } else {
        const float *xi = (const float *)x - a;
        for (uint64_t i = a; i < d; ++i)
            put_amp(o64, o32, i, qm_amp_scaled((double)xi[i], scale, coeff), nt);
    }
    if (b > d)
        memset(o64 ? (void *)(o64 + 2 * d) : (void *)(o32 + 2 * d), 0,
               (size_t)(b - d) * (o64 ? 16 : 8));
#if QM_CPU_NT
    if (nt && x)
        _mm_sfence();
#endif
}

/* Slots [lo, hi) of an amp_scale range (serial), cut where states begin. */
static void amp_scale_part(void *state, qmk_elem state_elem, uint64_t off, uint64_t g0,
                           uint64_t period, uint64_t period_valid, uint64_t first_state,
                           const double *coeffs, const double *scales, const void *in,
                           qmk_elem in_elem, uint64_t in_first, uint64_t lo, uint64_t hi, int nt)
{
    const size_t is = in_elem == QMK_F64 ? 8 : 4;
    for (uint64_t pos = lo; pos < hi;) {
        const uint64_t g = g0 + pos, sidx = g / period, local = g % period;
        const uint64_t end = period - local < hi - pos ? pos + (period - local) : hi;
        uint64_t data_end = pos;
        if (local < period_valid)
            data_end = pos + (period_valid - local < end - pos ? period_valid - local : end - pos);
        const void *x = NULL;
        if (in && data_end > pos)
            x = (const char *)in + (sidx * period_valid + local - in_first) * is;
        scale_part(state, state_elem, off, pos, data_end, end,
                   scales ? scales[sidx - first_state] : 1.0, coeffs[sidx - first_state], x,
                   in_elem, nt);
        pos = end;
    }
}

void qm_cpu_amp_scale(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                      uint64_t period, uint64_t period_valid, uint64_t first_state,
                      const double *coeffs, const double *scales, const void *in,
                      qmk_elem in_elem, uint64_t in_first)
{
    if (n < QM_OMP_MIN_ELEMS) {
        amp_scale_part(state, state_elem, off, g0, period, period_valid, first_state, coeffs,
                       scales, in, in_elem, in_first, 0, n, 0);
        return;
    }
    const int nt = n * (state_elem == QMK_C128 ? 16 : 8) >= QM_CPU_STREAM_BYTES;
    const int64_t np = (int64_t)((n + QM_CPU_PART - 1) / QM_CPU_PART);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; ++p) {
        const uint64_t lo = (uint64_t)p * QM_CPU_PART;
        amp_scale_part(state, state_elem, off, g0, period, period_valid, first_state, coeffs,
                       scales, in, in_elem, in_first, lo, n - lo < QM_CPU_PART ? n : lo + QM_CPU_PART,
                       nt);
    }
}

/* One region over the states (none below QM_OMP_MIN_ELEMS slots); each state is serial. */
void qm_cpu_amp_batch(void *state, qmk_elem state_elem, uint64_t off, uint64_t period,
                      uint64_t period_valid, uint64_t n_states, const void *in, qmk_elem in_elem,
                      uint64_t in_off, double *sums, uint64_t sums_off)
{
    const unsigned lp = (unsigned)__builtin_ctzll(period);
    const size_t is = in_elem == QMK_F64 ? 8 : 4, ss = state_elem == QMK_C128 ? 16 : 8;
    const int64_t ns = (int64_t)n_states;
    const int par = n_states * period >= QM_OMP_MIN_ELEMS;
    (void)par; /* read only by the OpenMP if-clause */
    const int nt = n_states * period * ss >= QM_CPU_STREAM_BYTES;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < ns; ++k) {
        const void *x = (const char *)in + (in_off + (uint64_t)k * period_valid) * is;
        const double sum = in_elem == QMK_F64
                               ? qm_tree_sumsq((const double *)x, 1, period_valid, lp, 1.0)
                               : qm_tree_sumsq_f32((const float *)x, 1, period_valid, lp, 1.0);
        sums[sums_off + (uint64_t)k] = sum;
        const uint64_t slot0 = off + (uint64_t)k * period;
        if (isfinite(sum) && sum >= QM_FAST_SUM_MIN)
            scale_part(state, state_elem, slot0, 0, period_valid, period, 1.0, 1.0 / sqrt(sum), x,
                       in_elem, nt);
        else /* the slow path rescales from the stash */
            stash_part((char *)state + slot0 * ss, state_elem, 0, period, period_valid, x, in_elem,
                       0, 0, 0, period_valid);
    }
}

/* Slot i of a complex128 (o64) or complex64 (o32: rounded once) output becomes (re, im). */
static inline void put_slot(double *o64, float *o32, uint64_t i, double re, double im)
{
    if (o64) {
        o64[2 * i] = re;
        o64[2 * i + 1] = im;
    } else {
        o32[2 * i] = (float)re;
        o32[2 * i + 1] = (float)im;
    }
}

void qm_cpu_product(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                    unsigned qubits, uint64_t first_state, const double *table, double scale)
{
    if (n == 0)
        return;
    const unsigned m = qubits < QM_PRODUCT_LO_BITS ? qubits : QM_PRODUCT_LO_BITS;
    const unsigned qa = qubits < 5 ? qubits : 5; /* A: qubits [0, qa), B: [5, qb) */
    const unsigned qb = m;
    const uint64_t bs = (uint64_t)1 << m, mask = bs - 1;
    /* blocks of 2^m aligned global indices (a state is a whole number of them) */
    const uint64_t b0 = g0 >> m, b1 = (g0 + n - 1) >> m;
    const int64_t nb = (int64_t)(b1 - b0 + 1);
    const int par = n >= (1u << 16);
    double *o64 = state_elem == QMK_C128 ? (double *)state + 2 * off : NULL;
    float *o32 = state_elem == QMK_C128 ? NULL : (float *)state + 2 * off;
#pragma omp parallel if (par)
    {
        double lo[2 << QM_PRODUCT_LO_BITS];
        uint64_t lo_state = UINT64_MAX;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < nb; ++b) {
            const uint64_t first = (b0 + (uint64_t)b) << m;
            const uint64_t s = first >> qubits;
            const double *f = table + (s - first_state) * 4 * (uint64_t)qubits;
            if (s != lo_state) { /* lo = A * B of this state: qm_product_lo from 32 + 32 values */
                double A[64], B[64];
                for (uint64_t j = 0; j < 32; ++j) {
                    qm_product_range(f, 0, qa, j, &A[2 * j], &A[2 * j + 1]);
                    qm_product_range(f, 5, qb, j << 5, &B[2 * j], &B[2 * j + 1]);
                }
                for (uint64_t j = 0; j < bs; ++j)
                    qm_cmul(A[2 * (j & 31)], A[2 * (j & 31) + 1], B[2 * (j >> 5)],
                            B[2 * (j >> 5) + 1], &lo[2 * j], &lo[2 * j + 1]);
                lo_state = s;
            }
            double hr, hi;
            qm_product_hi(f, qubits, first, &hr, &hi);
            const uint64_t a = first > g0 ? first - g0 : 0;
            const uint64_t e = first + bs - g0 < n ? first + bs - g0 : n;
            for (uint64_t i = a; i < e; ++i) {
                const uint64_t j = (g0 + i) & mask;
                double re, im;
                qm_product_amp(hr, hi, lo[2 * j], lo[2 * j + 1], scale, &re, &im);
                put_slot(o64, o32, i, re, im);
            }
        }
    }
}

/* ---- IQP: the phase vector and the Walsh-Hadamard stages (qm_math.h) -------------------------- */

/* The index of the top set bit of j > 0. */
static unsigned iqp_top_bit(unsigned j)
{
    unsigned top = 0;
    while (j >> (top + 1))
        ++top;
    return top;
}

void qm_cpu_iqp_phase(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                      unsigned qubits, unsigned n_coeffs, uint64_t first_state,
                      const double *table, double scale)
{
    /* qm_math.h's order 3, block by block: a block is the 2^min(qubits, 10) aligned slots of one
     * state that share h; its tables T (32), V_l (5 x 32) and Q (1024: Q(y) = U(y), Q(s) = Q(s
     * without its top bit) * V_top) give every slot v = scale * (Q * T); complex64 states take
     * order 3f (the same tables rounded to float32, U times scale first, the products in
     * float32) */
    if (n == 0)
        return;
    const unsigned lb = qubits < 10 ? qubits : 10, a1 = qubits < 5 ? qubits : 5;
    const unsigned ny = 1u << a1, ns = 1u << (lb - a1);
    const uint64_t mask = ((uint64_t)1 << qubits) - 1;
    const int pairs = n_coeffs > qubits;
    double *o64 = state_elem == QMK_C128 ? (double *)state + 2 * off : NULL;
    float *o32 = state_elem == QMK_C128 ? NULL : (float *)state + 2 * off;
    const uint64_t b0 = g0 >> lb, b1 = (g0 + n - 1) >> lb;
    const int64_t nb = (int64_t)(b1 - b0 + 1);
#pragma omp parallel for schedule(static) if (n >= 4096)
    for (int64_t bi = 0; bi < nb; ++bi) {
        const uint64_t first = (b0 + (uint64_t)bi) << lb, x0 = first & mask;
        const uint64_t lo = first > g0 ? first : g0;
        const uint64_t hi = first + ((uint64_t)1 << lb) < g0 + n ? first + ((uint64_t)1 << lb)
                                                                 : g0 + n;
        const double *c = table + ((first >> qubits) - first_state) * n_coeffs;
        double T[32][2], V[5][32][2], Q[1024][2];
        for (unsigned y = 0; y < ny; ++y) /* Q(s = 0) = U */
            qm_iqp_u(c, qubits, pairs, x0 | y, &Q[y][0], &Q[y][1]);
        for (unsigned j = 0; j < ns; ++j)
            qm_iqp_t(c, qubits, pairs, x0 | ((uint64_t)j << 5), &T[j][0], &T[j][1]);
        for (unsigned l = 0; l + 5 < lb; ++l)
            for (unsigned y = 0; y < ny; ++y)
                qm_iqp_v(c, qubits, pairs, 5 + l, y, &V[l][y][0], &V[l][y][1]);
        if (o32) { /* order 3f: the factors to float32 (U times scale first), products in float32 */
            float Tf[32][2], Vf[5][32][2], Qf[1024][2];
            for (unsigned y = 0; y < ny; ++y) {
                Qf[y][0] = (float)(scale * Q[y][0]);
                Qf[y][1] = (float)(scale * Q[y][1]);
            }
            for (unsigned j = 0; j < ns; ++j) {
                Tf[j][0] = (float)T[j][0];
                Tf[j][1] = (float)T[j][1];
            }
            for (unsigned l = 0; l + 5 < lb; ++l)
                for (unsigned y = 0; y < ny; ++y) {
                    Vf[l][y][0] = (float)V[l][y][0];
                    Vf[l][y][1] = (float)V[l][y][1];
                }
            for (unsigned j = 1; j < ns; ++j) {
                const unsigned top = iqp_top_bit(j), from = 32 * (j ^ (1u << top));
                for (unsigned y = 0; y < ny; ++y)
                    qm_cmulf(Qf[from + y][0], Qf[from + y][1], Vf[top][y][0], Vf[top][y][1],
                             &Qf[32 * j + y][0], &Qf[32 * j + y][1]);
            }
            for (uint64_t g = lo; g < hi; ++g) {
                const unsigned x = (unsigned)(g - first), j = x >> 5;
                qm_cmulf(Qf[x][0], Qf[x][1], Tf[j][0], Tf[j][1], &o32[2 * (g - g0)],
                         &o32[2 * (g - g0) + 1]);
            }
            continue;
        }
        for (unsigned j = 1; j < ns; ++j) {
            const unsigned top = iqp_top_bit(j), from = 32 * (j ^ (1u << top));
            for (unsigned y = 0; y < ny; ++y)
                qm_cmul(Q[from + y][0], Q[from + y][1], V[top][y][0], V[top][y][1],
                        &Q[32 * j + y][0], &Q[32 * j + y][1]);
        }
        for (uint64_t g = lo; g < hi; ++g) {
            const unsigned x = (unsigned)(g - first), j = x >> 5;
            double re, im;
            qm_iqp_join(Q[x][0], Q[x][1], T[j][0], T[j][1], scale, &re, &im);
            o64[2 * (g - g0)] = re;
            o64[2 * (g - g0) + 1] = im;
        }
    }
}

/* Stages below this many bits run chunk by chunk (a chunk of 2^12 slots stays in cache); each
 * higher stage is one pass. The order of stages, and so every element's additions, is the same. */
#define QM_WHT_CHUNK_BITS 12

/* Stages [b0, b1) over whole blocks: those below QM_WHT_CHUNK_BITS chunk by chunk, each higher one
 * a pass over the pairs (qm_wht_pair_lo); every pair one qm_wht_butterfly (BFLY: the element
 * type's). T is the component type (two per slot). */
#define QM_DEFINE_WHT(NAME, T, BFLY)                                                               \
    static void NAME##_pass(T *x, uint64_t n, unsigned b)                                          \
    {                                                                                              \
        const uint64_t h = (uint64_t)1 << b;                                                       \
        const int64_t np = (int64_t)(n / 2);                                                       \
        _Pragma("omp parallel for schedule(static) if (n >= 65536)")                              \
        for (int64_t pp = 0; pp < np; ++pp) {                                                      \
            T *u = x + 2 * qm_wht_pair_lo((uint64_t)pp, b), *w = u + 2 * h;                        \
            BFLY(u, u + 1, w, w + 1);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void NAME(T *x, uint64_t n, unsigned b0, unsigned b1)                                   \
    {                                                                                              \
        const unsigned top = b1 < QM_WHT_CHUNK_BITS ? b1 : QM_WHT_CHUNK_BITS;                      \
        if (b0 < top) {                                                                            \
            const uint64_t cs = (uint64_t)1 << top;                                                \
            const int64_t nc = (int64_t)(n / cs);                                                  \
            _Pragma("omp parallel for schedule(static) if (n >= 65536)")                          \
            for (int64_t c = 0; c < nc; ++c)                                                       \
                for (unsigned b = b0; b < top; ++b)                                                \
                    for (uint64_t p = 0; p < cs / 2; ++p) {                                        \
                        T *u = x + 2 * ((uint64_t)c * cs + qm_wht_pair_lo(p, b));                  \
                        T *w = u + 2 * ((uint64_t)1 << b);                                         \
                        BFLY(u, u + 1, w, w + 1);                                                  \
                    }                                                                              \
        }                                                                                          \
        for (unsigned b = b0 > top ? b0 : top; b < b1; ++b)                                        \
            NAME##_pass(x, n, b);                                                                  \
    }                                                                                              \
    static void NAME##_pair(T *x, const T *y, uint64_t n, int high)                                \
    {                                                                                              \
        const int64_t nn = (int64_t)(2 * n);                                                       \
        if (high) {                                                                                \
            _Pragma("omp parallel for schedule(static) if (n >= 65536)")                          \
            for (int64_t k = 0; k < nn; ++k)                                                       \
                x[k] = y[k] - x[k];                                                                \
        } else {                                                                                   \
            _Pragma("omp parallel for schedule(static) if (n >= 65536)")                          \
            for (int64_t k = 0; k < nn; ++k)                                                       \
                x[k] = x[k] + y[k];                                                                \
        }                                                                                          \
    }
QM_DEFINE_WHT(wht_c128, double, qm_wht_butterfly)
QM_DEFINE_WHT(wht_c64, float, qm_wht_butterfly_f32)

void qm_cpu_wht(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, unsigned b0,
                unsigned b1, const void *partner, int high)
{
    if (state_elem == QMK_C128) {
        double *x = (double *)state + 2 * off;
        if (partner)
            wht_c128_pair(x, partner, n, high);
        else
            wht_c128(x, n, b0, b1);
    } else {
        float *x = (float *)state + 2 * off;
        if (partner)
            wht_c64_pair(x, partner, n, high);
        else
            wht_c64(x, n, b0, b1);
    }
}
