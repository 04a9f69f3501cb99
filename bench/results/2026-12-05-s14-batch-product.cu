// session 14 microbenchmark: 10-qubit batch product variants against cudaMemset (same run).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cmath>
#include "../../kernels/qm_math.h" /* build from bench/results: nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -o pb 2026-12-05-s14-batch-product.cu */

template <typename F> double med(F f, int reps = 21)
{
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

__global__ void lin_const(double2 *x, uint64_t n)
{
    const uint64_t s = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += s)
        x[i] = make_double2(1.0, 2.0);
}
__global__ void lin_const_cs(double2 *x, uint64_t n)
{
    const uint64_t s = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += s)
        __stcs(x + i, make_double2(1.0, 2.0));
}
// warp per row range (rows of 512 bytes), constant: the pattern's ceiling
template <bool STCS>
__global__ void __launch_bounds__(256, 4) wrow_const(double2 *x, uint64_t rows)
{
    const uint64_t W = (uint64_t)gridDim.x * 8, w = (uint64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const uint64_t r0 = w * rows / W, r1 = (w + 1) * rows / W;
    const unsigned y = threadIdx.x & 31u;
    for (uint64_t r = r0; r < r1; ++r)
        if (STCS) __stcs(x + r * 32 + y, make_double2(1.0, 2.0));
        else x[r * 32 + y] = make_double2(1.0, 2.0);
}

// MODE 0 complex128, 2 complex64 pairs. Warp w takes rows [w T / W, (w + 1) T / W).
template <int MODE, bool UNIT, bool STCS, int MINB, bool PF = false>
__global__ void __launch_bounds__(256, MINB)
r5(void *state, uint64_t states, const double *table, double scale)
{
    if (PF)
        for (uint64_t o = ((uint64_t)blockIdx.x * 256 + threadIdx.x) * 128; o < states * 320;
             o += (uint64_t)gridDim.x * 256 * 128)
            asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"((const char *)table + o));
    __shared__ double2 bs[8][32];
    constexpr unsigned RB = MODE == 2 ? 4 : 5; /* log2 rows per state */
    const uint64_t W = (uint64_t)gridDim.x * 8, w = (uint64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const uint64_t T = states << RB;
    const uint64_t r0 = w * T / W, r1 = (w + 1) * T / W;
    const unsigned y = threadIdx.x & 31u;
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double2 *B = bs[threadIdx.x >> 5];
    for (uint64_t r = r0; r < r1;) {
        const uint64_t s = r >> RB;
        const unsigned m0 = (unsigned)(r & ((1u << RB) - 1));
        const uint64_t left = r1 - r;
        const unsigned m1 = left < (1u << RB) - m0 ? m0 + (unsigned)left : 1u << RB;
        const double *f = table + s * 40;
        double ar = 1.0, ai = 0.0, br = 1.0, bi = 0.0, cr = 1.0, ci = 0.0;
#pragma unroll
        for (unsigned k = 0; k < 5; ++k) {
            const double *p = f + 4 * k + 2 * ((a0 >> k) & 1u);
            const double *q = f + 4 * (5 + k) + 2 * ((y >> k) & 1u);
            qm_cmul(ar, ai, __ldg(p), __ldg(p + 1), &ar, &ai);
            qm_cmul(br, bi, __ldg(q), __ldg(q + 1), &br, &bi);
            if (MODE == 2) {
                const double *p1 = f + 4 * k + 2 * (((a0 + 1) >> k) & 1u);
                qm_cmul(cr, ci, __ldg(p1), __ldg(p1 + 1), &cr, &ci);
            }
        }
        __syncwarp();
        B[y] = make_double2(br, bi);
        __syncwarp();
        const uint64_t first = s << 10;
        if (MODE == 0) {
#pragma unroll 4
            for (unsigned m = m0; m < m1; ++m) {
                const double2 b = B[m];
                double lr, li;
                qm_cmul(ar, ai, b.x, b.y, &lr, &li);
                double vx = lr - 0.0 * li, vy = li + 0.0 * lr;
                if (!UNIT) { vx = scale * vx; vy = scale * vy; }
                double2 *d = (double2 *)state + first + y + 32 * m;
                if (STCS) __stcs(d, make_double2(vx, vy)); else *d = make_double2(vx, vy);
            }
        } else {
#pragma unroll 4
            for (unsigned m = m0; m < m1; ++m) {
                const double2 b = B[2 * m + (y >= 16 ? 1u : 0u)];
                double l0r, l0i, l1r, l1i;
                qm_cmul(ar, ai, b.x, b.y, &l0r, &l0i);
                qm_cmul(cr, ci, b.x, b.y, &l1r, &l1i);
                double v0 = l0r - 0.0 * l0i, v1 = l0i + 0.0 * l0r, v2 = l1r - 0.0 * l1i, v3 = l1i + 0.0 * l1r;
                if (!UNIT) { v0 *= scale; v1 *= scale; v2 *= scale; v3 *= scale; }
                float4 *d = (float4 *)((float2 *)state + first + 2 * (y + 32 * m));
                const float4 v = make_float4((float)v0, (float)v1, (float)v2, (float)v3);
                if (STCS) __stcs(d, v); else *d = v;
            }
        }
        r += m1 - m0;
    }
}

#define QM_PD_THREADS 256
__device__ __forceinline__ void store_pair_f32(void *state, uint64_t g, uint64_t g0, uint64_t g1,
                                               const float (&v)[4])
{
    const bool in0 = g >= g0 && g < g1, in1 = g + 1 >= g0 && g + 1 < g1;
    if (in0 && in1)
        *(float4 *)((float2 *)state + (g - g0)) = make_float4(v[0], v[1], v[2], v[3]);
    else if (in0)
        ((float2 *)state)[g - g0] = make_float2(v[0], v[1]);
    else if (in1)
        ((float2 *)state)[g + 1 - g0] = make_float2(v[2], v[3]);
}


template <bool UNIT, bool ONE>
__device__ __forceinline__ double2 product_amp3(double2 h, double2 lo, double scale)
{
    double2 v;
    if (ONE) {
        v.x = lo.x - 0.0 * lo.y;
        v.y = lo.y + 0.0 * lo.x;
    } else {
        qm_cmul(h.x, h.y, lo.x, lo.y, &v.x, &v.y);
    }
    if (!UNIT) {
        v.x = scale * v.x;
        v.y = scale * v.y;
    }
    return v;
}


template <int MODE, bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 3) /* 85 registers, no spills */
product_batch10_r4_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state,
                          const double *table, double scale, uint64_t l2_bytes)
{
    __shared__ double2 bs[QM_PD_THREADS / 32][2][32]; /* per warp, B of alternate states */
    const unsigned y = threadIdx.x & 31u;
    double2(*bw)[32] = bs[threadIdx.x >> 5];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n;
    const uint64_t stride = (uint64_t)gridDim.x * (QM_PD_THREADS / 32);
    unsigned k = 0; /* the warp's state count: its B buffer */
    uint64_t t = t0 + (uint64_t)blockIdx.x * (QM_PD_THREADS / 32) + (threadIdx.x >> 5);
    constexpr int NA = MODE == 2 ? 2 : 1; /* A entries per lane */
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    /* the factors of A[a0] (fr[0]), B[y] (fr[1]) and, for pairs, qubit 0's factor of A[a0 + 1]
     * (a0 is even: A[a0 + 1] differs from A[a0] in qubit 0 only) */
    double fr[2][5], fi[2][5], f1r = 0.0, f1i = 0.0;
    auto load = [&](uint64_t ts) {
        if (ts <= tl) {
            const double *f = table + (ts - first_state) * 4 * QM_PRODUCT_LO_BITS;
#pragma unroll
            for (int w = 0; w < 2; ++w)
#pragma unroll
                for (unsigned k = 0; k < 5; ++k) {
                    const unsigned q = w == 0 ? k : 5 + k, bits = w == 0 ? a0 : y;
                    const double *p = f + 4 * q + 2 * ((bits >> k) & 1u);
                    fr[w][k] = __ldg(p);
                    fi[w][k] = __ldg(p + 1);
                }
            if (NA == 2) {
                f1r = __ldg(f + 2);
                f1i = __ldg(f + 3);
            }
        }
    };
    {
        /* the range's factor tables (320 bytes a state) to L2 first, in one burst and marked
         * evict-last, when they fit in half of it: the states' streaming stores (evict-first) then
         * run without a DRAM read between them */
        const char *f0 = (const char *)(table + (t0 - first_state) * 4 * QM_PRODUCT_LO_BITS);
        const uint64_t bytes = (tl - t0 + 1) * 4 * QM_PRODUCT_LO_BITS * sizeof(double);
        if (bytes <= l2_bytes / 2)
            for (uint64_t o = ((uint64_t)blockIdx.x * QM_PD_THREADS + threadIdx.x) * 128; o < bytes;
                 o += (uint64_t)gridDim.x * QM_PD_THREADS * 128)
                asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(f0 + o));
    }
    load(t);
    for (; t <= tl; t += stride) {
        double2 ab[NA + 1]; /* A entries, then B[y]: qm_product_range's products from (1, 0) */
#pragma unroll
        for (int w = 0; w <= NA; ++w) {
            const int src = w == NA ? 1 : 0;
            double r = 1.0, m = 0.0;
#pragma unroll
            for (unsigned k = 0; k < 5; ++k) {
                const bool one = w == 1 && NA == 2 && k == 0; /* A[a0 + 1]'s qubit 0 */
                qm_cmul(r, m, one ? f1r : fr[src][k], one ? f1i : fi[src][k], &r, &m);
            }
            ab[w] = make_double2(r, m);
        }
        load(t + stride); /* in flight while this state is written */
        /* B[y] to the warp's buffer k & 1, last read for state k - 2, before state k - 1's
         * __syncwarp */
        double2 *B = bw[k & 1u];
        ++k;
        B[y] = ab[NA];
        __syncwarp();
        const uint64_t first = t << QM_PRODUCT_LO_BITS;
        const bool inside = first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1; /* uniform */
        if (MODE != 2) {
#pragma unroll 8
            for (unsigned m = 0; m < 32; ++m) {
                const double2 b = B[m]; /* one address for the warp: a broadcast */
                double2 lo;
                qm_cmul(ab[0].x, ab[0].y, b.x, b.y, &lo.x, &lo.y);
                const double2 a = product_amp3<UNIT, true>(make_double2(1.0, 0.0), lo, scale);
                const uint64_t g = first + y + 32 * m;
                if (!inside && (g < g0 || g >= g1))
                    continue;
                if (MODE == 0) /* streaming stores: the states are not read again here */
                    __stcs((double2 *)state + (g - g0), a);
                else
                    __stcs((float2 *)state + (g - g0), make_float2((float)a.x, (float)a.y));
            }
        } else {
#pragma unroll 4
            for (unsigned m = 0; m < 16; ++m) {
                const double2 b = B[2 * m + (y >= 16 ? 1u : 0u)]; /* two addresses: broadcasts */
                float v[4];
#pragma unroll
                for (int w = 0; w < 2; ++w) {
                    double2 lo;
                    qm_cmul(ab[w].x, ab[w].y, b.x, b.y, &lo.x, &lo.y);
                    const double2 a = product_amp3<UNIT, true>(make_double2(1.0, 0.0), lo, scale);
                    v[2 * w] = (float)a.x;
                    v[2 * w + 1] = (float)a.y;
                }
                const uint64_t g = first + 2 * (y + 32 * m);
                if (inside) {
                    __stcs((float4 *)((float2 *)state + (g - g0)), make_float4(v[0], v[1], v[2], v[3]));
                    continue;
                }
                store_pair_f32(state, g, g0, g1, v);
            }
        }
    }
}


template <typename K> int blocks_of(K k, int threads)
{
    int per = 0, sms = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, threads, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    return per * sms;
}

// reference (host): amplitude j of state s
static void ref_amp(const double *f, unsigned j, double scale, double *re, double *im)
{
    double ar = 1, ai = 0, br = 1, bi = 0;
    for (unsigned k = 0; k < 5; ++k) qm_cmul(ar, ai, f[4 * k + 2 * ((j >> k) & 1)], f[4 * k + 2 * ((j >> k) & 1) + 1], &ar, &ai);
    for (unsigned k = 0; k < 5; ++k) qm_cmul(br, bi, f[4 * (5 + k) + 2 * ((j >> (5 + k)) & 1)], f[4 * (5 + k) + 2 * ((j >> (5 + k)) & 1) + 1], &br, &bi);
    double lr, li; qm_cmul(ar, ai, br, bi, &lr, &li);
    double vx = lr - 0.0 * li, vy = li + 0.0 * lr;
    if (scale != 1.0) { vx *= scale; vy *= scale; }
    *re = vx; *im = vy;
}

int main()
{
    const uint64_t S = 65536, n = S << 10;
    const size_t b128 = n * 16, b64 = n * 8;
    std::vector<double> tab(S * 40);
    for (size_t i = 0; i < tab.size(); ++i) tab[i] = std::cos(0.001 * (double)i);
    void *st; double *tb;
    cudaMalloc(&st, b128); cudaMalloc((void **)&tb, tab.size() * 8);
    cudaMemcpy(tb, tab.data(), tab.size() * 8, cudaMemcpyHostToDevice);
    cudaMemset(st, 0, b128); cudaDeviceSynchronize();
    const double f128 = med([&] { cudaMemset(st, 1, b128); }), f64 = med([&] { cudaMemset(st, 1, b64); });
    printf("fill c128 %.4f ms  c64 %.4f ms\n", f128, f64);
    auto rep = [&](const char *name, double ms, double fill) { printf("%-34s %.4f ms  %5.1f%%\n", name, ms, 100 * fill / ms); };
    { int g = blocks_of(lin_const, 256); rep("lin_const c128", med([&] { lin_const<<<g, 256>>>((double2 *)st, n); }), f128);
      rep("lin_const c64-bytes", med([&] { lin_const<<<g, 256>>>((double2 *)st, n / 2); }), f64); }
    { int g = blocks_of(lin_const_cs, 256); rep("lin_const_cs c128", med([&] { lin_const_cs<<<g, 256>>>((double2 *)st, n); }), f128); }
    { int g = blocks_of(wrow_const<true>, 256); rep("wrow_const stcs c128", med([&] { wrow_const<true><<<g, 256>>>((double2 *)st, n / 32); }), f128);
      rep("wrow_const stcs c64-bytes", med([&] { wrow_const<true><<<g, 256>>>((double2 *)st, n / 64); }), f64); }
    { int g = blocks_of(wrow_const<false>, 256); rep("wrow_const plain c128", med([&] { wrow_const<false><<<g, 256>>>((double2 *)st, n / 32); }), f128); }
#define V(MODE, UNIT, STCS, MINB, fill, label)                                                              \
    {                                                                                                      \
        auto k = r5<MODE, UNIT, STCS, MINB>; int g = blocks_of(k, 256);                                    \
        double sc = UNIT ? 1.0 : 0.03125;                                                                  \
        char nm[96]; snprintf(nm, sizeof nm, "r5 %s unit%d stcs%d minb%d g%d", label, UNIT, STCS, MINB, g); \
        rep(nm, med([&] { k<<<g, 256>>>(st, S, tb, sc); }), fill);                                         \
    }
    {
        cudaDeviceProp pr; cudaGetDeviceProperties(&pr, 0);
        const uint64_t l2 = (uint64_t)pr.l2CacheSize;
#define R4(MODE, UNIT, fill, label) { auto k = product_batch10_r4_kernel<MODE, UNIT>; int g = blocks_of(k, 256); \
        double sc = UNIT ? 1.0 : 0.03125; char nm[96]; snprintf(nm, sizeof nm, "r4 %s unit%d g%d", label, UNIT, g); \
        rep(nm, med([&] { k<<<g, 256>>>(st, n, 0, 0, tb, sc, l2); }), fill); }
        R4(0, true, f128, "c128") R4(0, false, f128, "c128") R4(2, true, f64, "c64p") R4(2, false, f64, "c64p")
    }
    V(0, true, true, 3, f128, "c128") V(0, true, true, 4, f128, "c128") V(0, true, true, 6, f128, "c128") V(0, true, true, 8, f128, "c128")
    V(0, true, false, 4, f128, "c128") V(0, true, false, 6, f128, "c128")
    V(0, false, true, 4, f128, "c128") V(0, false, true, 6, f128, "c128")
#define VP(MODE, UNIT, MINB, fill, label)                                                              \
    {                                                                                                      \
        auto k = r5<MODE, UNIT, true, MINB, true>; int g = blocks_of(k, 256);                              \
        double sc = UNIT ? 1.0 : 0.03125;                                                                  \
        char nm[96]; snprintf(nm, sizeof nm, "r5pf %s unit%d minb%d g%d", label, UNIT, MINB, g);           \
        rep(nm, med([&] { k<<<g, 256>>>(st, S, tb, sc); }), fill);                                         \
    }
    VP(0, true, 4, f128, "c128") VP(0, true, 6, f128, "c128") VP(0, false, 4, f128, "c128") VP(0, false, 6, f128, "c128")
    VP(2, true, 4, f64, "c64p") VP(2, true, 6, f64, "c64p") VP(2, false, 4, f64, "c64p") VP(2, false, 6, f64, "c64p")
    V(2, true, true, 3, f64, "c64p") V(2, true, true, 4, f64, "c64p") V(2, true, true, 6, f64, "c64p") V(2, true, true, 8, f64, "c64p")
    V(2, true, false, 4, f64, "c64p") V(2, true, false, 6, f64, "c64p")
    V(2, false, true, 4, f64, "c64p") V(2, false, true, 6, f64, "c64p")
    // check bits of r5 c128 (unit and phase) and c64 pairs against the host
    int bad = 0;
    for (int mode = 0; mode < 3; ++mode) {
        const double sc = mode == 1 ? 0.03125 : 1.0;
        if (mode == 0) { auto k = r5<0, true, true, 4>; k<<<blocks_of(k, 256), 256>>>(st, S, tb, sc); }
        if (mode == 1) { auto k = r5<0, false, true, 4>; k<<<blocks_of(k, 256), 256>>>(st, S, tb, sc); }
        if (mode == 2) { auto k = r5<2, true, true, 4>; k<<<blocks_of(k, 256), 256>>>(st, S, tb, sc); }
        std::vector<double> h(mode == 2 ? n : 2 * n);
        cudaMemcpy(h.data(), st, mode == 2 ? b64 : b128, cudaMemcpyDeviceToHost);
        for (uint64_t s = 0; s < S; s += 97)
            for (unsigned j = 0; j < 1024; ++j) {
                double re, im; ref_amp(&tab[s * 40], j, sc, &re, &im);
                bool ok;
                if (mode == 2) { const float *fl = (const float *)h.data(); ok = fl[2 * ((s << 10) + j)] == (float)re && fl[2 * ((s << 10) + j) + 1] == (float)im; }
                else ok = h[2 * ((s << 10) + j)] == re && h[2 * ((s << 10) + j) + 1] == im;
                if (!ok && bad++ < 5) printf("mode %d state %llu slot %u differs\n", mode, (unsigned long long)s, j);
            }
    }
    printf("bit check: %d differences\n", bad);
    printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
