/* cpu_kernels.c — see cpu_kernels.h. OpenMP appears here and in hal/sim only; every parallel loop
 * has an `if` clause so that small ranges stay on one thread, and a build without OpenMP computes
 * the same results serially. */
#include "cpu_kernels.h"
#include "qm_math.h"

#include <math.h>

#define QM_OMP_MIN_ELEMS 65536

void qm_cpu_sumsq_blocks(const void *in, qm_dtype in_dtype, uint64_t in_off, uint64_t n_valid,
                         unsigned log2_block, uint64_t n_blocks, double scale, double *out_sums)
{
    const uint64_t bs = (uint64_t)1 << log2_block;
    const int64_t nb = (int64_t)n_blocks;
    const int par = n_valid >= QM_OMP_MIN_ELEMS;
    if (in_dtype == QM_DTYPE_FLOAT64) {
        const double *x = (const double *)in + in_off;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t b = 0; b < nb; ++b) {
            uint64_t lo = (uint64_t)b * bs;
            uint64_t valid = lo >= n_valid ? 0 : (n_valid - lo < bs ? n_valid - lo : bs);
            out_sums[b] = qm_tree_sumsq_double(x + lo, valid, log2_block, scale);
        }
    } else {
        const float *x = (const float *)in + in_off;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t b = 0; b < nb; ++b) {
            uint64_t lo = (uint64_t)b * bs;
            uint64_t valid = lo >= n_valid ? 0 : (n_valid - lo < bs ? n_valid - lo : bs);
            out_sums[b] = qm_tree_sumsq_float(x + lo, valid, log2_block, scale);
        }
    }
}

void qm_cpu_scan(const void *in, qm_dtype in_dtype, uint64_t in_off, uint64_t n, double *max_abs,
                 uint64_t *first_nonfinite)
{
    /* Slow path only: serial, in index order, so "first" is well defined. */
    double m = 0.0;
    uint64_t first = UINT64_MAX;
    for (uint64_t i = 0; i < n; ++i) {
        double v = in_dtype == QM_DTYPE_FLOAT64 ? ((const double *)in)[in_off + i]
                                                : (double)((const float *)in)[in_off + i];
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

#define AMP_LOOP(OT, IT)                                                                           \
    do {                                                                                           \
        OT *o = (OT *)out + 2 * out_off;                                                           \
        const IT *x = nv ? (const IT *)in + in_off : NULL;                                         \
        _Pragma("omp parallel for schedule(static) if (par)")                                      \
        for (int64_t i = 0; i < nv; ++i) {                                                         \
            o[2 * i] = (OT)((double)x[i] * coeff);                                                 \
            o[2 * i + 1] = (OT)0;                                                                  \
        }                                                                                          \
        _Pragma("omp parallel for schedule(static) if (par)")                                      \
        for (int64_t i = nv; i < no; ++i) {                                                        \
            o[2 * i] = (OT)0;                                                                      \
            o[2 * i + 1] = (OT)0;                                                                  \
        }                                                                                          \
    } while (0)

void qm_cpu_amp_write(void *out, qm_dtype out_dtype, uint64_t out_off, uint64_t n_out,
                      const void *in, qm_dtype in_dtype, uint64_t in_off, uint64_t n_valid,
                      double coeff)
{
    const int64_t nv = (int64_t)n_valid, no = (int64_t)n_out;
    const int par = n_out >= QM_OMP_MIN_ELEMS;
    if (out_dtype == QM_DTYPE_COMPLEX128) {
        if (in_dtype == QM_DTYPE_FLOAT64)
            AMP_LOOP(double, double);
        else
            AMP_LOOP(double, float);
    } else {
        if (in_dtype == QM_DTYPE_FLOAT64)
            AMP_LOOP(float, double);
        else
            AMP_LOOP(float, float);
    }
}
