/* qm_math.h — the encode maths shared by the CPU kernels and the CUDA kernels.
 *
 * Role: one definition of the numbers, so both backends agree bit for bit.
 * - The sum of squares of a state is a fixed pairwise tree over the global index space: every aligned
 *   power-of-two range is a subtree. A block of 2^k elements is summed as leaves of 8
 *   ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) merged level by level; elements past the data count as 0.
 *   Adding +0 is exact, so a block with padding folds its partial subtrees from the right.
 * - Each square is (scale * x)^2 in float64, with scale = 1 on the fast path and a power of two on
 *   the rescaled retry for values whose squares overflow or underflow (qm_rescale_factor: from the
 *   exponent of the largest magnitude, so that the scaled sum of squares is a normal number for
 *   every finite nonzero input).
 * - An amplitude is ((double)x * scale) * coeff, with coeff = 1 / sqrt(scaled sum), then rounded
 *   once more to the output precision; the imaginary part is 0. The scale is never folded into the
 *   coefficient: scale / sqrt(sum) overflows for all-subnormal input (2^1023 / 2^-50) and loses
 *   bits as a subnormal for input near DBL_MAX. On the fast path scale = 1 and x * 1 is exact, so
 *   the amplitude is x * coeff, bit for bit.
 * Compile with floating-point contraction off (-ffp-contract=off, nvcc --fmad=false): an FMA would
 * round differently on the two backends.
 * Must not: allocate, use OpenMP or CUDA APIs (only the QM_HD annotation, and CUDA's sincos in
 * device code).
 */
#ifndef QM_MATH_H
#define QM_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define QM_HD static __host__ __device__ __forceinline__
#else
#define QM_HD static inline
#endif

/* Largest block a kernel sums on its own; longer aligned ranges are cut into blocks of this size and
 * the block sums combined with qm_tree_combine. */
#define QM_RED_LOG2_BLOCK 14

QM_HD double qm_sq(double x, double scale)
{
    double v = x * scale;
    return v * v;
}

/* The leaf of 8 squares: ((q0+q1)+(q2+q3))+((q4+q5)+(q6+q7)). */
QM_HD double qm_leaf8_combine(const double q[8])
{
    return ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
}

/* The two halves of every tree sum below: a leaf's value pushed onto the stack of finished
 * subtrees (leaf g merges with its left neighbours for each trailing 1 bit of g), and the stack
 * folded from the right at the end (the padding's subtrees are +0, so folding is exact). A tree
 * of fewer than 8 elements (q[0..4), missing ones +0) is the same shape. */
QM_HD void qm_tree_push(double *stack, int *top, uint64_t g, double acc)
{
    for (uint64_t c = g; c & 1; c >>= 1)
        acc = stack[--*top] + acc;
    stack[(*top)++] = acc;
}
QM_HD double qm_tree_fold(const double *stack, int top)
{
    if (top == 0)
        return 0.0;
    double acc = stack[--top];
    while (top > 0)
        acc = stack[--top] + acc;
    return acc;
}
QM_HD double qm_tree_small(const double q[4], unsigned log2n)
{
    if (log2n == 0)
        return q[0];
    if (log2n == 1)
        return q[0] + q[1];
    return (q[0] + q[1]) + (q[2] + q[3]);
}

/* Tree sums over a block of 2^log2n elements whose first n_valid are data; element i is
 * x[i * stride] (stride 1: contiguous input or complex64 stash slots; 2: the real parts of
 * complex128 slots). Leaves of 8 are ((q0+q1)+(q2+q3))+((q4+q5)+(q6+q7)); leaves merge level by
 * level; blocks of fewer than 8 elements are smaller trees of the same shape. One definition per
 * element type (float input, double input or stash). */
#define QM_DEFINE_TREE_SUMSQ(NAME, T)                                                              \
    QM_HD double NAME##_leaf8(const T *x, uint64_t stride, unsigned valid, double s)               \
    {                                                                                              \
        double q[8];                                                                               \
        if (valid == 8 && stride == 1) {                                                           \
            for (unsigned i = 0; i < 8; ++i)                                                       \
                q[i] = qm_sq((double)x[i], s);                                                     \
        } else {                                                                                   \
            for (unsigned i = 0; i < 8; ++i)                                                       \
                q[i] = i < valid ? qm_sq((double)x[i * stride], s) : 0.0;                          \
        }                                                                                          \
        return qm_leaf8_combine(q);                                                                \
    }                                                                                              \
    QM_HD double NAME(const T *x, uint64_t stride, uint64_t n_valid, unsigned log2n, double s)     \
    {                                                                                              \
        if (log2n < 3) {                                                                           \
            double q[4] = {0, 0, 0, 0};                                                            \
            const uint64_t n = (uint64_t)1 << log2n;                                               \
            for (uint64_t i = 0; i < n && i < n_valid; ++i)                                        \
                q[i] = qm_sq((double)x[i * stride], s);                                            \
            return qm_tree_small(q, log2n);                                                        \
        }                                                                                          \
        double stack[64];                                                                          \
        int top = 0;                                                                               \
        const uint64_t n_leaves = (n_valid + 7) / 8, full = n_valid / 8;                           \
        for (uint64_t g = 0; g < n_leaves; ++g)                                                    \
            qm_tree_push(stack, &top, g,                                                           \
                         NAME##_leaf8(x + 8 * g * stride, stride,                                  \
                                      g < full ? 8u : (unsigned)(n_valid - 8 * g), s));            \
        return qm_tree_fold(stack, top);                                                           \
    }
QM_DEFINE_TREE_SUMSQ(qm_tree_sumsq, double)
QM_DEFINE_TREE_SUMSQ(qm_tree_sumsq_f32, float)

/* The norm check's sum of |psi|^2 over written amplitudes, as the same tree: over a block of
 * 2^log2n slot positions of which [lo, hi) hold amplitudes and the others count as +0 (exact: every
 * term is >= +0), x pointing at the amplitude of position lo (interleaved re, im of type T). Each
 * term is re * re + im * im in float64; leaves of 8 terms, merged level by level, so a whole block
 * is the subtree the tree sums of qm_tree_sumsq would give for these terms, and a block cut at
 * either end gives the tree with +0 in the missing positions. */
#define QM_DEFINE_TREE_NORMSQ(NAME, T)                                                             \
    QM_HD double NAME##_term(const T *x, uint64_t i)                                               \
    {                                                                                              \
        const double re = (double)x[2 * i], im = (double)x[2 * i + 1];                             \
        return re * re + im * im;                                                                  \
    }                                                                                              \
    QM_HD double NAME##_leaf8(const T *x, uint64_t lo, uint64_t hi, uint64_t p0)                   \
    {                                                                                              \
        double q[8];                                                                               \
        if (p0 >= lo && p0 + 8 <= hi) {                                                            \
            for (unsigned i = 0; i < 8; ++i)                                                       \
                q[i] = NAME##_term(x, p0 - lo + i);                                                \
        } else {                                                                                   \
            for (unsigned i = 0; i < 8; ++i)                                                       \
                q[i] = p0 + i >= lo && p0 + i < hi ? NAME##_term(x, p0 + i - lo) : 0.0;            \
        }                                                                                          \
        return qm_leaf8_combine(q);                                                                \
    }                                                                                              \
    QM_HD double NAME(const T *x, uint64_t lo, uint64_t hi, unsigned log2n)                        \
    {                                                                                              \
        if (log2n < 3) {                                                                           \
            double q[4] = {0, 0, 0, 0};                                                            \
            const uint64_t n = (uint64_t)1 << log2n;                                               \
            for (uint64_t p = lo; p < hi && p < n; ++p)                                            \
                q[p] = NAME##_term(x, p - lo);                                                     \
            return qm_tree_small(q, log2n);                                                        \
        }                                                                                          \
        double stack[64];                                                                          \
        int top = 0;                                                                               \
        const uint64_t n_leaves = (hi + 7) / 8;                                                    \
        for (uint64_t g = 0; g < n_leaves; ++g)                                                    \
            qm_tree_push(stack, &top, g, 8 * g + 8 <= lo ? 0.0 : NAME##_leaf8(x, lo, hi, 8 * g));  \
        return qm_tree_fold(stack, top);                                                           \
    }
QM_DEFINE_TREE_NORMSQ(qm_tree_normsq_c128, double)
QM_DEFINE_TREE_NORMSQ(qm_tree_normsq_c64, float)

/* A fast-path sum below this may have lost bits to underflow: such states (and non-finite sums)
 * take the rescaled slow path. */
#define QM_FAST_SUM_MIN 0x1p-968

/* Data slots in the block of bs slots starting at global index gs (within one state). */
QM_HD uint64_t qm_block_valid(uint64_t gs, uint64_t bs, uint64_t period, uint64_t period_valid)
{
    const uint64_t local = gs % period;
    if (local >= period_valid)
        return 0;
    return period_valid - local < bs ? period_valid - local : bs;
}

/* Input elements (row-major batch x period_valid indices) whose slots lie in global slots
 * [lo, hi), hi > lo: [*e_lo, *e_hi). */
QM_HD void qm_input_range(uint64_t lo, uint64_t hi, uint64_t period, uint64_t period_valid,
                          uint64_t *e_lo, uint64_t *e_hi)
{
    const uint64_t s0 = lo / period, l0 = lo % period, s1 = (hi - 1) / period, l1 = (hi - 1) % period;
    *e_lo = s0 * period_valid + (l0 < period_valid ? l0 : period_valid);
    *e_hi = s1 * period_valid + (l1 + 1 < period_valid ? l1 + 1 : period_valid);
}

/* The amplitude of a value: x * coeff on the fast path (scale 1), (x * scale) * coeff on the slow
 * path. x * scale is exact unless it is subnormal (an amplitude below 2^-1021 then carries an
 * absolute error of at most 2^-1075 * coeff). */
QM_HD double qm_amp(double x, double coeff) { return x * coeff; }
QM_HD double qm_amp_scaled(double x, double scale, double coeff) { return (x * scale) * coeff; }

/* The exact power of two 2^e as a double, for -1074 <= e <= 1023 (subnormal below -1022), built
 * from its bits: no libm call, nothing rounded, the same on both backends. */
QM_HD double qm_pow2(int e)
{
    union {
        uint64_t u;
        double d;
    } v;
    v.u = e >= -1022 ? (uint64_t)(e + 1023) << 52 : (uint64_t)1 << (e + 1074);
    return v.d;
}

/* The slow path's scale for a state whose largest magnitude is max_abs (finite, > 0): 2^-e where
 * max_abs is in [2^(e-1), 2^e) (frexp's exponent), so the largest scaled value is in [0.5, 1);
 * capped at 2^1023 (max_abs below 2^-1024, subnormal: the largest scaled value is then in
 * [2^-51, 0.5), its square a normal number). The scaled sum of squares of a state of at most 2^62
 * slots is in [2^-102, 2^62), so coeff = 1 / sqrt(sum) is a normal number in (2^-31, 2^51].
 * The exponent comes from the bits (a subnormal is first multiplied by 2^64, exactly). */
QM_HD double qm_rescale_factor(double max_abs)
{
    union {
        double d;
        uint64_t u;
    } v;
    v.d = max_abs;
    int shift = 0;
    if (((v.u >> 52) & 0x7ff) == 0) {
        v.d = max_abs * 0x1p64;
        shift = 64;
    }
    const int e = (int)((v.u >> 52) & 0x7ff) - 1022 - shift;
    return qm_pow2(-e > 1023 ? 1023 : -e);
}

/* Combine n (a power of two) subtree sums, in index order, into their parent: level by level,
 * v[i] = v[i] + v[i + w]. Destroys v; returns the root. */
QM_HD double qm_tree_combine(double *v, uint64_t n)
{
    for (uint64_t w = 1; w < n; w *= 2)
        for (uint64_t i = 0; i + w < n; i += 2 * w)
            v[i] = v[i] + v[i + w];
    return n ? v[0] : 0.0;
}

/* The same root without destroying v: the leaves pushed in index order onto the stack of finished
 * subtrees (qm_tree_push), 8 at a time as qm_leaf8_combine when n >= 8 (a leaf of 8 is the
 * tree's bottom 3 levels), so the loads of a leaf are independent. n a power of two (0: 0). */
QM_HD double qm_tree_root(const double *v, uint64_t n)
{
    double stack[64];
    int top = 0;
    if (n < 8) {
        for (uint64_t g = 0; g < n; ++g)
            qm_tree_push(stack, &top, g, v[g]);
        return qm_tree_fold(stack, top);
    }
    for (uint64_t g = 0; g < n / 8; ++g) {
        double q[8];
        for (int j = 0; j < 8; ++j)
            q[j] = v[8 * g + j];
        qm_tree_push(stack, &top, g, qm_leaf8_combine(q));
    }
    return qm_tree_fold(stack, top);
}


/* ---- product states: angle, basis and phase encodings -----------------------------------------
 * Every amplitude of a product state is a product of one complex factor per qubit: for index i of
 * a state of n qubits, factor q is f_q(bit q of i), given as table[4q + 2b] (re) and
 * [4q + 2b + 1] (im) for bit b. The evaluation order is fixed, so both backends and every layout
 * give the same bits. The index is cut into digits of 10 bits (qubits [10d, 10d + 10), the last
 * one shorter: D = ceil(n / 10) digits), and the low digit into two halves of 5 bits:
 *   T_d(i) = ((1 * f_10d) * f_10d+1) ... * f_min(10d+10,n)-1   left to right from 1, d >= 1
 *   A(i)   = ((1 * f_0) * f_1) ... * f_{min(n,5)-1}             the qubits [0, min(n, 5))
 *   B(i)   = ((1 * f_5) * f_6) ... * f_{min(n,10)-1}            the qubits [5, min(n, 10)) (1 if none)
 *   lo(i)  = A(i) * B(i)
 *   hi(i)  = P_1(i), P_{D-1} = T_{D-1}(i), P_d = T_d(i) * P_{d+1}(i)  ((1, 0) when n <= 10)
 *   a(i)   = scale * (hi(i) * lo(i)),
 * each complex product (ar br - ai bi, ar bi + ai br) without fused multiply-adds. A and B take
 * 32 values each per state (a GPU keeps them in shared memory and pays one product for lo), hi is
 * shared by each aligned block of 2^10 amplitudes, and for n <= 20 hi is the one digit T_1. */
#define QM_PRODUCT_LO_BITS 10

QM_HD void qm_cmul(double ar, double ai, double br, double bi, double *re, double *im)
{
    const double r = ar * br - ai * bi;
    const double i = ar * bi + ai * br;
    *re = r;
    *im = i;
}

/* The product of the factors of qubits [q0, q1) for index i, left to right from 1 ((1, 0) when
 * q0 >= q1). */
QM_HD void qm_product_range(const double *table, unsigned q0, unsigned q1, uint64_t i, double *re,
                            double *im)
{
    double r = 1.0, m = 0.0;
    for (unsigned q = q0; q < q1; ++q) {
        const double *f = table + 4 * q + 2 * ((i >> q) & 1u);
        qm_cmul(r, m, f[0], f[1], &r, &m);
    }
    *re = r;
    *im = m;
}

/* lo(i) = A(i) * B(i) of a state of n qubits (depends on bits 0..9 of i only). */
QM_HD void qm_product_lo(const double *table, unsigned n, uint64_t i, double *re, double *im)
{
    double ar, ai, br, bi;
    qm_product_range(table, 0, n < 5 ? n : 5, i, &ar, &ai);
    qm_product_range(table, 5, n < 10 ? n : 10, i, &br, &bi);
    qm_cmul(ar, ai, br, bi, re, im);
}

/* hi(i) of a state of n qubits (depends on bits 10.. of i only): the digits from the top one
 * down, each T_d times the product of those above it. */
QM_HD void qm_product_hi(const double *table, unsigned n, uint64_t i, double *re, double *im)
{
    double r = 1.0, m = 0.0;
    if (n > QM_PRODUCT_LO_BITS) {
        unsigned d0 = QM_PRODUCT_LO_BITS * ((n - 1) / QM_PRODUCT_LO_BITS); /* the top digit */
        qm_product_range(table, d0, n, i, &r, &m);
        while (d0 > QM_PRODUCT_LO_BITS) {
            d0 -= QM_PRODUCT_LO_BITS;
            double tr, ti;
            qm_product_range(table, d0, d0 + QM_PRODUCT_LO_BITS, i, &tr, &ti);
            qm_cmul(tr, ti, r, m, &r, &m);
        }
    }
    *re = r;
    *im = m;
}

/* The amplitude from its hi and lo parts: scale * (hi * lo). */
QM_HD void qm_product_amp(double hr, double hi, double lr, double li, double scale, double *re,
                          double *im)
{
    double r, m;
    qm_cmul(hr, hi, lr, li, &r, &m);
    *re = scale * r;
    *im = scale * m;
}

/* ---- IQP encodings (iqp-z, iqp): a phase per basis index, then a Walsh-Hadamard transform -------
 * Order 1 (CUDA's kernel generations before round 3; the CPU and rounds 3 and 4 use order 3, below):
 * v(x) = scale * (cos phi(x), sin phi(x)), phi(x) the sum of the per-state coefficients c (n_coeffs
 * doubles: d_k = c[k] for the n qubits, then, when n_coeffs > n, d_kl = c[qm_iqp_pair(n, k, l)] for
 * the pairs (0,1), (0,2) .. (0,n-1), (1,2) .. (n-2,n-1)) of the bits and pairs of bits set in x,
 * summed in one fixed order from +0. The bits are grouped: a = [0, min(n,5)), b = [5, min(n,10)),
 * h = [10, n), and
 *   W_g   = the linear terms of group g in increasing k, then its pairs in table order
 *   X     = sum over l in b with bit l set (increasing) of C_l, C_l = sum over k in a, bit k set, of d_kl
 *   E_g   = sum over k in g (a or b) with bit k set of e_k, e_k = sum over l in h, bit l set, of d_kl
 *   phi   = ((((W_a + W_b) + X) + (E_a + E_b)) + W_h)
 * every inner sum in increasing index order from +0 over the set bits only (X and the E are +0 for
 * iqp-z). So phi of a block of 2^10 indices (h fixed) costs a few additions per index from tables
 * of 32 entries (W_a, W_b, C_l, E_a, E_b; W_h one number), which is how the GPU computes it; the
 * CPU computes the same sums directly. No partial sum is ever -0 (sums start at +0), so adding a
 * +0 instead of skipping a term gives the same bits. cos and sin are the platform's (libm on the
 * CPU, CUDA's on the GPU): they may differ by an ulp, everything else is the same operations in
 * the same order.
 * The transform: stage b maps every pair (u, w) of slots differing in bit b (u the one with the bit
 * clear) to (u + w, u - w), real and imaginary parts apart; stages run in increasing bit order. */

/* Index of the pair (k, l), k < l < n, in the coefficient table. */
QM_HD unsigned qm_iqp_pair(unsigned n, unsigned k, unsigned l)
{
    return n + k * (n - 1) - k * (k - 1) / 2 + (l - k - 1);
}

/* W over the bits [g0, g1) of x: linear terms, then (pairs) the group's own pairs. */
QM_HD double qm_iqp_group(const double *c, unsigned n, int pairs, unsigned g0, unsigned g1,
                          uint64_t x)
{
    double s = 0.0;
    for (unsigned k = g0; k < g1; ++k)
        if ((x >> k) & 1u)
            s = s + c[k];
    if (pairs)
        for (unsigned k = g0; k < g1; ++k) {
            if (!((x >> k) & 1u))
                continue;
            for (unsigned l = k + 1; l < g1; ++l)
                if ((x >> l) & 1u)
                    s = s + c[qm_iqp_pair(n, k, l)];
        }
    return s;
}

/* C_l: sum of d_kl over k in [k0, k1) with bit k of x set. */
QM_HD double qm_iqp_cross(const double *c, unsigned n, unsigned k0, unsigned k1, unsigned l,
                          uint64_t x)
{
    double s = 0.0;
    for (unsigned k = k0; k < k1; ++k)
        if ((x >> k) & 1u)
            s = s + c[qm_iqp_pair(n, k, l)];
    return s;
}

/* e_k: sum of d_kl over l in [10, n) with bit l of x set. */
QM_HD double qm_iqp_edge(const double *c, unsigned n, unsigned k, uint64_t x)
{
    double s = 0.0;
    for (unsigned l = 10; l < n; ++l)
        if ((x >> l) & 1u)
            s = s + c[qm_iqp_pair(n, k, l)];
    return s;
}

QM_HD double qm_iqp_phi(const double *c, unsigned n, unsigned n_coeffs, uint64_t x)
{
    const int pairs = n_coeffs > n;
    const unsigned a1 = n < 5 ? n : 5, b1 = n < 10 ? n : 10;
    const double wa = qm_iqp_group(c, n, pairs, 0, a1, x);
    const double wb = qm_iqp_group(c, n, pairs, 5, b1, x);
    double xs = 0.0, ea = 0.0, eb = 0.0;
    if (pairs) {
        for (unsigned l = 5; l < b1; ++l)
            if ((x >> l) & 1u)
                xs = xs + qm_iqp_cross(c, n, 0, a1, l, x);
        for (unsigned k = 0; k < a1; ++k)
            if ((x >> k) & 1u)
                ea = ea + qm_iqp_edge(c, n, k, x);
        for (unsigned k = 5; k < b1; ++k)
            if ((x >> k) & 1u)
                eb = eb + qm_iqp_edge(c, n, k, x);
    }
    const double wh = qm_iqp_group(c, n, pairs, 10, n, x);
    return (((wa + wb) + xs) + (ea + eb)) + wh;
}

/* Order 1's v(x) of a phase: scale * (cos phi, sin phi) with the platform's cos and sin: libm's
 * on the CPU (the tests' reference for CUDA rounds 0-2), CUDA's sincos on the GPU (one argument reduction for both, within 2 ulp like its sin and
 * cos). One definition, so every CUDA kernel that writes phases writes the same bits. */
QM_HD void qm_iqp_amp(double phi, double scale, double *re, double *im)
{
#if defined(__CUDA_ARCH__)
    double s, c;
    sincos(phi, &s, &c);
    *re = scale * c;
    *im = scale * s;
#else
    *re = scale * cos(phi);
    *im = scale * sin(phi);
#endif
}

/* ---- IQP phases, order 3: a product of unit complex numbers (the CPU and CUDA rounds 3, 4) ----
 * exp(i phi(x)) is not formed from phi: the sum is cut into pieces whose unit numbers are shared
 * by many slots, so a block of 2^10 slots needs 65 cos/sin pairs (225 when its state changes)
 * instead of 1024. With the groups a, b, h and the sums of the order above (W_a, W_b, W_h, C_l,
 * E_a, E_b, each summed exactly as there), for x = y + 32 s + 1024 h (y the bits of a, s those of
 * b):
 *   U(x)   = unit(W_a + E_a)                                  depends on y and h
 *   T(x)   = unit(W_b + E_b) * unit(W_h)                      depends on s and h
 *   V_l(x) = unit(C_l), l in b                                depends on y (and the state) only
 *   Q(x)   = ((U * V_l1) * V_l2) ... over the set bits l1 < l2 < .. of s, from U
 *   v(x)   = scale * (Q * T)
 * unit(t) = (cos t, sin t) with the platform's functions (libm on the CPU, CUDA's sincos on the
 * GPU), every product a qm_cmul (no fused multiply-add; its two operands may be swapped without
 * changing a bit), each complex component multiplied by scale. When scale is a power of two (every
 * IQP state's 2^-n) that product is exact, so a GPU may multiply U by it first and get the same
 * bits. iqp-z has no C_l: its V_l are unit(+0) = (1, 0) exactly on both backends, and the products
 * by them are made all the same (the same bits on both sides, no special case). Q over s is built
 * by a GPU or a CPU table as Q(s) = Q(s without its top bit) * V_top, which is the same sequence
 * of products: two complex products per slot (the earlier order 2 formed P from (1, 0), then
 * (U * T) * P: three).
 * Numerics: every unit number has cos and sin within 2 ulp of the exact values on CUDA (under 1
 * ulp with glibc), so one factor of the GPU and the CPU differ by at most about 3 ulp of 1 per
 * component; v is a product of at most 8 factors (U, T's two, the five V_l) in 7 complex
 * products, so the GPU's v is within about 63 * 2^-53 * scale of the CPU's per component (the
 * tests allow 128; docs/encodings.md). Against the exact exp(i phi) the error is that of the
 * factors' arguments (each a shorter sum than phi, so a smaller rounding) plus about 10 roundings
 * of 2^-53. */
QM_HD void qm_iqp_unit(double t, double *re, double *im)
{
#if defined(__CUDA_ARCH__)
    double s, c;
    sincos(t, &s, &c);
    *re = c;
    *im = s;
#else
    *re = cos(t);
    *im = sin(t);
#endif
}

/* E over the bits [g0, g1) of x: the e_k (qm_iqp_edge) of the set bits, increasing, from +0. */
QM_HD double qm_iqp_edges(const double *c, unsigned n, int pairs, unsigned g0, unsigned g1,
                          uint64_t x)
{
    double s = 0.0;
    if (pairs)
        for (unsigned k = g0; k < g1; ++k)
            if ((x >> k) & 1u)
                s = s + qm_iqp_edge(c, n, k, x);
    return s;
}

/* U(x) = unit(W_a + E_a). */
QM_HD void qm_iqp_u(const double *c, unsigned n, int pairs, uint64_t x, double *re, double *im)
{
    const unsigned a1 = n < 5 ? n : 5;
    qm_iqp_unit(qm_iqp_group(c, n, pairs, 0, a1, x) + qm_iqp_edges(c, n, pairs, 0, a1, x), re, im);
}

/* T(x) = unit(W_b + E_b) * unit(W_h). */
QM_HD void qm_iqp_t(const double *c, unsigned n, int pairs, uint64_t x, double *re, double *im)
{
    const unsigned b1 = n < 10 ? n : 10;
    double br, bi, hr, hi;
    qm_iqp_unit(qm_iqp_group(c, n, pairs, 5, b1, x) + qm_iqp_edges(c, n, pairs, 5, b1, x), &br,
                &bi);
    qm_iqp_unit(qm_iqp_group(c, n, pairs, 10, n, x), &hr, &hi);
    qm_cmul(br, bi, hr, hi, re, im);
}

/* V_l(x) = unit(C_l), l in [5, min(n, 10)) (unit(+0) = (1, 0) without pairs). */
QM_HD void qm_iqp_v(const double *c, unsigned n, int pairs, unsigned l, uint64_t x, double *re,
                    double *im)
{
    qm_iqp_unit(pairs ? qm_iqp_cross(c, n, 0, n < 5 ? n : 5, l, x) : 0.0, re, im);
}

/* Q(x): (ur, ui) = U(x), then times the V_l of the set bits l of x in [5, min(n, 10)), increasing. */
QM_HD void qm_iqp_q(const double *c, unsigned n, int pairs, uint64_t x, double ur, double ui,
                    double *re, double *im)
{
    double r = ur, m = ui;
    const unsigned b1 = n < 10 ? n : 10;
    for (unsigned l = 5; l < b1; ++l)
        if ((x >> l) & 1u) {
            double vr, vi;
            qm_iqp_v(c, n, pairs, l, x, &vr, &vi);
            qm_cmul(r, m, vr, vi, &r, &m);
        }
    *re = r;
    *im = m;
}

/* v = scale * (Q * T). */
QM_HD void qm_iqp_join(double qr, double qi, double tr, double ti, double scale, double *re,
                       double *im)
{
    double r, m;
    qm_cmul(qr, qi, tr, ti, &r, &m);
    *re = scale * r;
    *im = scale * m;
}

/* v(x) of one slot from scratch (the GPU's one-slot-per-thread kernel; tables give the same bits). */
QM_HD void qm_iqp_phase3(const double *c, unsigned n, unsigned n_coeffs, uint64_t x, double scale,
                         double *re, double *im)
{
    const int pairs = n_coeffs > n;
    double ur, ui, tr, ti, qr, qi;
    qm_iqp_u(c, n, pairs, x, &ur, &ui);
    qm_iqp_t(c, n, pairs, x, &tr, &ti);
    qm_iqp_q(c, n, pairs, x, ur, ui, &qr, &qi);
    qm_iqp_join(qr, qi, tr, ti, scale, re, im);
}

/* ---- IQP phases of complex64 states (order 3f) ----------------------------------------------------
 * A complex64 state's phases are order 3's unit numbers taken to float32, then multiplied in
 * float32: U, T and the V_l are formed in float64 exactly as above (the same sums, the same
 * unit(), T's product in float64), then rounded to float32 each, U after its product by scale
 * (scale * U per component in float64: exact when scale is a power of two, every IQP state's
 * 2^-n); Q(s) = Q(s without its top bit) * V_top from that U and v = Q * T are qm_cmulf products,
 * with no scale after them. Why: a complex64 state is written in float32 and its Walsh-Hadamard
 * stages add in float32 already, so the state's precision is float32's; in float32 the two
 * products a slot leave the float64 pipe, and only the 7 unit numbers of a lane are converted
 * instead of every slot. (It was made for speed, on the guess that the float64 pipe bounded the
 * complex64 10-qubit batch: 0.23 ms on both an H100 and an H200. Measured on an H100 in session
 * 24 it did not change the time, 0.228 ms: the pass is bound by instruction issue and latency,
 * 60% of issue slots busy at 23% occupancy. It stays for the agreement between backends below.)
 * Accuracy: each factor within half a float32 ulp, at most 7
 * float32 products after it (one rounding each): v within about 9 * 2^-24 of its magnitude per
 * component; against the exact value the float64 factors' error (about 2^-50) disappears below
 * that. Across backends: the GPU's and the CPU's float64 unit numbers differ by at most a few
 * float64 ulps (CUDA's sincos against libm), which round to the same float32 unless they straddle
 * a float32 rounding boundary, so complex64 IQP states agree bit for bit between the simulator
 * and CUDA except for such rare factors (one float32 ulp, then the products that follow it). */

/* (ar + i ai) * (br + i bi) in float32, the components as qm_cmul's (no fused multiply-add). */
QM_HD void qm_cmulf(float ar, float ai, float br, float bi, float *re, float *im)
{
    const float r = ar * br - ai * bi;
    const float i = ar * bi + ai * br;
    *re = r;
    *im = i;
}

/* v(x) of one slot of a complex64 state from scratch, order 3f (the GPU's one-slot-per-thread
 * kernel; the CPU's and the fused kernels' tables give the same bits). */
QM_HD void qm_iqp_phase3f(const double *c, unsigned n, unsigned n_coeffs, uint64_t x, double scale,
                          float *re, float *im)
{
    const int pairs = n_coeffs > n;
    double ur, ui, tr, ti;
    qm_iqp_u(c, n, pairs, x, &ur, &ui);
    qm_iqp_t(c, n, pairs, x, &tr, &ti);
    float qr = (float)(scale * ur), qi = (float)(scale * ui);
    const unsigned b1 = n < 10 ? n : 10;
    for (unsigned l = 5; l < b1; ++l)
        if ((x >> l) & 1u) {
            double vr, vi;
            qm_iqp_v(c, n, pairs, l, x, &vr, &vi);
            qm_cmulf(qr, qi, (float)vr, (float)vi, &qr, &qi);
        }
    qm_cmulf(qr, qi, (float)tr, (float)ti, re, im);
}

/* The slot with bit b clear of pair p of stage b: p with a 0 inserted at bit b. */
QM_HD uint64_t qm_wht_pair_lo(uint64_t p, unsigned b)
{
    return ((p >> b) << (b + 1)) | (p & (((uint64_t)1 << b) - 1));
}

/* One butterfly, real and imaginary parts apart: (u, w) -> (u + w, u - w). */
QM_HD void qm_wht_butterfly(double *ur, double *ui, double *wr, double *wi)
{
    const double a = *ur, b = *ui, c = *wr, d = *wi;
    *ur = a + c, *ui = b + d;
    *wr = a - c, *wi = b - d;
}
QM_HD void qm_wht_butterfly_f32(float *ur, float *ui, float *wr, float *wi)
{
    const float a = *ur, b = *ui, c = *wr, d = *wi;
    *ur = a + c, *ui = b + d;
    *wr = a - c, *wi = b - d;
}

#endif
