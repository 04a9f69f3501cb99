/* cuda.c — the CUDA backend over the CUDA runtime (plain C; kernels live in kernels/cuda_kernels.cu).
 *
 * In: HAL calls already checked by hal.c. Out: cudaMalloc'd device buffers (never managed memory),
 * copies and kernel launches on per-device streams, CUDA errors translated into E-BACKEND (E-CAPACITY
 * for cudaErrorMemoryAllocation) naming the operation, the device and the error, with CUDA's sticky
 * last error cleared after a recoverable failure.
 * Must not: abort, print, or leave a device current other than the one it found (each call sets
 * the device it works on).
 * Known wart: the kernels are the first straightforward versions (see cuda_kernels.cu).
 */
#include "cuda_backend.h"
#include "cuda_kernels.h"
#include "hal_impl.h"
#include "status_internal.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A freed device buffer kept for reuse (see c_buf_free). */
typedef struct kept_buf {
    int phys;
    uint64_t bytes;
    void *ptr;
} kept_buf;

#define QM_CUDA_KEPT_MAX 8 /* buffers kept at most */

typedef struct cuda_ctx {
    int n_dev;               /* logical devices */
    int *phys;               /* logical -> physical CUDA device */
    qm_hal_device_info *info;
    unsigned char *peer;     /* n_dev * n_dev: peer access enabled (or the same GPU) */
    double *scratch[64];     /* per physical GPU: block sums of sumsq, kept between calls */
    size_t scratch_n[64];
    pthread_mutex_t keep_lock;
    bool keep_on;            /* QM_CUDA_KEEP=0 in the environment turns keeping off */
    int batch_shape;         /* QM_CUDA_BATCH_SHAPE=1..5: a block shape of the batch kernel's sweep
                                for every launch (developers, tests); 0 = the default */
    int kernels;             /* QM_CUDA_KERNELS=legacy (round 0), round1, round2 or round3: every
                                op on that generation (bisection, side-by-side timing); unset:
                                QM_CUDA_KERNELS_DEFAULT, each op on the generation measured
                                fastest for it (k_product, k_iqp, k_sums below) */
    int n_kept;
    kept_buf kept[QM_CUDA_KEPT_MAX];
} cuda_ctx;

static qm_code cuda_err(qm_status *st, cudaError_t e, const char *op, int dev);

/* Device room for n doubles of block sums on logical device dev (grown, never shrunk). */
static qm_code scratch_get(cuda_ctx *c, int dev, size_t n, double **out, qm_status *st)
{
    const int p = c->phys[dev] < 64 ? c->phys[dev] : 63;
    if (c->scratch_n[p] < n) {
        if (c->scratch[p])
            (void)cudaFree(c->scratch[p]);
        c->scratch[p] = NULL;
        c->scratch_n[p] = 0;
        cudaError_t e = cudaMalloc((void **)&c->scratch[p], n * sizeof(double));
        if (e != cudaSuccess)
            return cuda_err(st, e, "cudaMalloc (sumsq partials)", dev);
        c->scratch_n[p] = n;
    }
    *out = c->scratch[p];
    return QM_OK;
}

/* The physical CUDA device of a logical device. */
static int PH(void *ctx, int dev) { return ((cuda_ctx *)ctx)->phys[dev]; }

static qm_code cuda_err(qm_status *st, cudaError_t e, const char *op, int dev)
{
    (void)cudaGetLastError(); /* clear the sticky error of a recoverable failure */
    qm_code code = e == cudaErrorMemoryAllocation ? QM_E_CAPACITY : QM_E_BACKEND;
    return qm_fail_backend(st, code, (int)e, "%s on cuda:%d failed: %s (%s)", op, dev,
                           cudaGetErrorName(e), cudaGetErrorString(e));
}

#define CU(st, expr, op, dev)                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_err((st), e_, (op), (dev));                                                \
    } while (0)

int qm_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

qm_code qm_hal_cuda_start(int gpu, qm_status *st)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return qm_fail(st, QM_E_UNSUPPORTED, "cuda: no CUDA device (%s)",
                       e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    }
    if (gpu < 0)
        return QM_OK;
    if ((e = cudaSetDevice(gpu % n)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        (void)cudaGetLastError();
        return qm_fail(st, QM_E_BACKEND, "cuda: starting GPU %d failed: %s", gpu % n,
                       cudaGetErrorName(e));
    }
    return QM_OK;
}

static void host_register_spares(void);

void qm_hal_cuda_preload(int gpu)
{
    int n = 0;
    if (gpu < 0 || cudaGetDeviceCount(&n) != cudaSuccess || n == 0 ||
        cudaSetDevice(gpu % n) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    host_register_spares(); /* page-locked while the caller opens the backend and allocates */
    (void)qm_cuda_preload_kernels();
    (void)qm_cuda_preload_batch_kernels();
}

static int c_device_count(void *ctx) { return ((cuda_ctx *)ctx)->n_dev; }

static qm_code c_device_info(void *ctx, int dev, qm_hal_device_info *out, qm_status *st)
{
    (void)st;
    *out = ((cuda_ctx *)ctx)->info[dev];
    return QM_OK;
}

static bool c_peer(void *ctx, int a, int b)
{
    cuda_ctx *c = ctx;
    return c->peer[a * c->n_dev + b] != 0;
}

/* Kept buffers: cudaMalloc and cudaFree of a large state cost tens of milliseconds (a 16 GiB
 * buffer: 40 ms on an H200, a fifth of encoding 2^30 values from pinned host memory), so a freed
 * buffer is kept and handed out again for a request of exactly its size on the same GPU. Before
 * it is kept, the GPU is synchronised (as cudaFree would), so no work still uses it. When
 * cudaMalloc fails, the GPU's kept buffers are given back and cudaMalloc tried once more; trim and
 * destroy give all of them back. */
static void *keep_take(cuda_ctx *c, int phys, uint64_t bytes)
{
    void *p = NULL;
    pthread_mutex_lock(&c->keep_lock);
    for (int i = 0; i < c->n_kept; ++i)
        if (c->kept[i].phys == phys && c->kept[i].bytes == bytes) {
            p = c->kept[i].ptr;
            c->kept[i] = c->kept[--c->n_kept];
            break;
        }
    pthread_mutex_unlock(&c->keep_lock);
    return p;
}

static bool keep_put(cuda_ctx *c, int phys, uint64_t bytes, void *ptr)
{
    bool kept = false;
    pthread_mutex_lock(&c->keep_lock);
    if (c->keep_on && c->n_kept < QM_CUDA_KEPT_MAX) {
        c->kept[c->n_kept++] = (kept_buf){phys, bytes, ptr};
        kept = true;
    }
    pthread_mutex_unlock(&c->keep_lock);
    return kept;
}

/* Give back the kept buffers of GPU phys (every GPU when phys < 0); returns how many. */
static int keep_release(cuda_ctx *c, int phys)
{
    int n = 0;
    pthread_mutex_lock(&c->keep_lock);
    for (int i = 0; i < c->n_kept;) {
        if (phys >= 0 && c->kept[i].phys != phys) {
            ++i;
            continue;
        }
        if (cudaSetDevice(c->kept[i].phys) != cudaSuccess || cudaFree(c->kept[i].ptr) != cudaSuccess)
            (void)cudaGetLastError();
        c->kept[i] = c->kept[--c->n_kept];
        ++n;
    }
    pthread_mutex_unlock(&c->keep_lock);
    return n;
}

static qm_code c_buf_alloc(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                           qm_status *st)
{
    cuda_ctx *c = ctx;
    const int phys = PH(ctx, dev);
    *ptr = *host_ptr = NULL;
    CU(st, cudaSetDevice(phys), "cudaSetDevice", dev);
    void *p = keep_take(c, phys, bytes);
    if (p) {
        *ptr = p;
        return QM_OK;
    }
    cudaError_t e = cudaMalloc(&p, (size_t)bytes);
    if (e == cudaErrorMemoryAllocation && keep_release(c, phys) > 0) {
        (void)cudaGetLastError();
        CU(st, cudaSetDevice(phys), "cudaSetDevice", dev);
        e = cudaMalloc(&p, (size_t)bytes);
    }
    if (e != cudaSuccess)
        return cuda_err(st, e, "cudaMalloc", dev);
    *ptr = p;
    return QM_OK;
}

static void c_buf_free(void *ctx, int dev, void *ptr, uint64_t bytes)
{
    cuda_ctx *c = ctx;
    const int phys = PH(ctx, dev);
    if (cudaSetDevice(phys) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    /* kept only once nothing on the GPU can still be using it */
    if (cudaDeviceSynchronize() == cudaSuccess && keep_put(c, phys, bytes, ptr))
        return;
    if (cudaFree(ptr) != cudaSuccess)
        (void)cudaGetLastError();
}

static void c_trim(void *ctx) { (void)keep_release(ctx, -1); }

/* Everything on the device's GPU, whoever enqueued it (engine/stages/reuse.c waits here before it
 * writes a kept state buffer again that an exported tensor may have been read from). */
static qm_code c_device_sync(void *ctx, int dev, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaDeviceSynchronize(), "cudaDeviceSynchronize", dev);
    return QM_OK;
}

static qm_code c_stream_create(void *ctx, int dev, void **out, qm_status *st)
{
    (void)ctx;
    cudaStream_t s = NULL;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", dev);
    *out = s;
    return QM_OK;
}

static void c_stream_destroy(void *ctx, int dev, void *s)
{
    (void)ctx;
    if (cudaSetDevice(PH(ctx, dev)) != cudaSuccess || cudaStreamDestroy((cudaStream_t)s) != cudaSuccess)
        (void)cudaGetLastError();
}

static qm_code c_stream_sync(void *ctx, int dev, void *s, qm_status *st)
{
    (void)ctx;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize", dev);
    return QM_OK;
}

static qm_code c_copy(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                      enum cudaMemcpyKind kind, const char *op, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, (cudaStream_t)s), op, dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), op, dev);
    return QM_OK;
}

static qm_code c_copy_h2d(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                          qm_status *st)
{
    return c_copy(ctx, dev, dst, src, bytes, s, cudaMemcpyHostToDevice, "cudaMemcpy H2D", st);
}

static qm_code c_copy_d2h(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                          qm_status *st)
{
    return c_copy(ctx, dev, dst, src, bytes, s, cudaMemcpyDeviceToHost, "cudaMemcpy D2H", st);
}

static qm_code c_copy_d2d(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                          qm_status *st)
{
    return c_copy(ctx, dev, dst, src, bytes, s, cudaMemcpyDeviceToDevice, "cudaMemcpy D2D", st);
}

static qm_code c_copy_peer(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                           uint64_t bytes, void *s, qm_status *st)
{
    const int pd = PH(ctx, dst_dev), ps = PH(ctx, src_dev);
    CU(st, cudaSetDevice(pd), "cudaSetDevice", dst_dev);
    if (pd == ps) /* two logical devices on one GPU */
        CU(st, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)s),
           "cudaMemcpy D2D", dst_dev);
    else
        CU(st, cudaMemcpyPeerAsync(dst, pd, src, ps, (size_t)bytes, (cudaStream_t)s),
           "cudaMemcpyPeer", dst_dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "cudaMemcpyPeer", dst_dev);
    return QM_OK;
}

/* The launchers' plain element parameters (cuda_kernels.h: int c128, int f64) of a dtype: a switch
 * over every qm_dtype, so a new dtype fails -Wswitch here instead of passing as the wrong type. */
static int is_c128(qm_dtype dt)
{
    switch (dt) {
    case QM_DTYPE_COMPLEX128: return 1;
    case QM_DTYPE_COMPLEX64: return 0;
    case QM_DTYPE_FLOAT32:
    case QM_DTYPE_FLOAT64: break;
    }
    return 0; /* not a state dtype: the wrappers refused it before */
}
static int is_f64(qm_dtype dt)
{
    switch (dt) {
    case QM_DTYPE_FLOAT64: return 1;
    case QM_DTYPE_FLOAT32: return 0;
    case QM_DTYPE_COMPLEX64:
    case QM_DTYPE_COMPLEX128: break;
    }
    return 0; /* not an input dtype: the wrappers refused it before */
}
static size_t slot_bytes(qm_dtype dt) { return is_c128(dt) ? 16 : 8; }

/* The kernel generation each op runs (cuda_kernels.h's QM_CUDA_KERNELS_*): QM_CUDA_KERNELS=NAME
 * runs every op on that generation; by default (QM_CUDA_KERNELS_DEFAULT) each op takes the one
 * measured fastest for it on the H200 (bench_cuda's BM_Product, BM_Iqp and
 * BM_NormCheck, the generations side by side in one run: bench/results/2026-12-04-session10-h200.md
 * and 2026-12-04-session11-h200.md). Every generation writes the same bits for the products and
 * the sums; IQP's phases follow qm_math.h's order 3 (the CPU's) on rounds 3 and 4 only. */
static int k_product(const void *ctx)
{
    const int k = ((const cuda_ctx *)ctx)->kernels;
    /* round 5: batches of 10-qubit states with their factors read in bursts, 88.6% / 89.7% of a
     * fill (complex64 / complex128) for 65536 of them against round 4's 80.6% / 84.0% (session 23,
     * H200, the kernel's microbenchmark); states of more than 10 qubits with each thread's lo in
     * registers, half the float64 operations of round 4 (93.2% / 81.0% of a fill for 2^30 on the
     * H200, session 23) */
    return k == QM_CUDA_KERNELS_DEFAULT ? QM_CUDA_KERNELS_ROUND5 : k;
}
static int k_iqp(const void *ctx)
{
    const int k = ((const cuda_ctx *)ctx)->kernels;
    /* round 4 (its fused pass; the wht passes and the iqp_phase op are round 3's): a batch of
     * 65536 x 10 qubits in 0.41 / 0.27 ms, complex128 / complex64 (round 3: 0.53 / 0.44, round 2:
     * 0.61 / 0.55), a 2^30 state in 37.8 / 21.6 ms (round 3: 37.6 / 23.3; session 11, H200) */
    return k == QM_CUDA_KERNELS_DEFAULT ? QM_CUDA_KERNELS_ROUND4 : k;
}
/* Sums of squares over blocks of 2^log2_block: of the input (from_input) or of a stash / state. */
static int k_sums(const void *ctx, int c128, unsigned log2_block, int from_input)
{
    const int k = ((const cuda_ctx *)ctx)->kernels;
    if (k != QM_CUDA_KERNELS_DEFAULT)
        return k;
    /* round 3's one warp per block wins for blocks of up to 2^10 (a batch of 10-qubit states:
     * 84-88% of a read against 23-63%) and for complex128 states (2^30: 90% against 79%);
     * round 2's one CUDA block per 2^14 elements for float64 input and complex64 states (99-101%
     * against 78-83%) */
    return log2_block <= 10 || (c128 && !from_input) ? QM_CUDA_KERNELS_ROUND3
                                                     : QM_CUDA_KERNELS_CURRENT;
}
static size_t in_bytes(qm_dtype dt) { return is_f64(dt) ? 8 : 4; }

static qm_code c_stash(void *ctx, int dev, void *state, const void *in, const qm_hal_stash_args *a,
                       void *s, qm_status *st)
{
    (void)ctx;
    const size_t es = in_bytes(a->in_dtype);
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_stash(state, is_c128(a->out_dtype), a->slot_g0, a->period,
                                  a->period_valid, (const char *)in + a->in_off * es,
                                  is_f64(a->in_dtype), a->in_first, a->n, s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "stash launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "stash", dev);
    return QM_OK;
}

/* The block-sum kernel of sumsq on stream s, into device memory at out. */
static qm_code sumsq_launch(void *ctx, int dev, const void *state, const void *in,
                            const qm_hal_sumsq_args *a, double *out, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_sumsq(state ? (const char *)state + a->off * slot_bytes(a->state_dtype)
                                        : NULL,
                                  is_c128(a->state_dtype), a->g0, a->period,
                                  a->period_valid, a->log2_block, a->n_blocks, a->scale, out, in,
                                  is_f64(a->in_dtype), a->in_first,
                                  k_sums(ctx, is_c128(a->state_dtype), a->log2_block, in != NULL),
                                  s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "sumsq launch", dev);
    return QM_OK;
}

/* Blocking: into this GPU's scratch, then copied to the host array a->out_sums. */
static qm_code c_sumsq(void *ctx, int dev, const void *state, const void *in,
                       const qm_hal_sumsq_args *a, qm_status *st)
{
    double *d_sums = NULL;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    qm_code rc = scratch_get(ctx, dev, (size_t)a->n_blocks, &d_sums, st);
    if (rc == QM_OK)
        rc = sumsq_launch(ctx, dev, state, in, a, d_sums, NULL, st);
    if (rc != QM_OK)
        return rc;
    CU(st, cudaMemcpy(a->out_sums, d_sums, (size_t)a->n_blocks * sizeof(double),
                      cudaMemcpyDeviceToHost), "sumsq result copy", dev);
    return QM_OK;
}

/* Enqueued on s (waited for when s is NULL), into the caller's device buffer. */
static qm_code c_sumsq_dev(void *ctx, int dev, const void *state, const void *in,
                           const qm_hal_sumsq_args *a, double *out, void *s, qm_status *st)
{
    qm_code rc = sumsq_launch(ctx, dev, state, in, a, out, s, st);
    if (rc == QM_OK && !s)
        CU(st, cudaStreamSynchronize(NULL), "sumsq", dev);
    return rc;
}

static qm_code c_scan(void *ctx, int dev, const void *state, const qm_hal_scan_args *a,
                      qm_status *st)
{
    const qm_dtype state_dtype = a->state_dtype;
    const uint64_t off = a->off, n = a->n;
    qm_hal_scan_result *out = a->out;
    (void)ctx;
    unsigned long long h[2] = {0, UINT64_MAX}, *d = NULL;
    qm_code rc = QM_OK;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    cudaError_t e = cudaMalloc((void **)&d, sizeof h);
    if (e != cudaSuccess)
        return cuda_err(st, e, "cudaMalloc (scan)", dev);
    if ((e = cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice)) != cudaSuccess) {
        rc = cuda_err(st, e, "scan init", dev);
        goto done;
    }
    int le = qm_cuda_launch_scan((const char *)state + off * slot_bytes(state_dtype),
                                 is_c128(state_dtype), n, d, NULL);
    if (le != cudaSuccess) {
        rc = cuda_err(st, (cudaError_t)le, "scan launch", dev);
        goto done;
    }
    if ((e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        rc = cuda_err(st, e, "scan result copy", dev);
        goto done;
    }
    memcpy(&out->max_abs, &h[0], sizeof out->max_abs);
    out->first_nonfinite = h[1];
done:
    cudaFree(d);
    return rc;
}

static qm_code c_amp_scale(void *ctx, int dev, void *state, const void *in,
                           const qm_hal_amp_scale_args *a, void *s, qm_status *st)
{
    (void)ctx;
    double *d_coeffs = NULL;
    qm_code rc = QM_OK;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    const uint64_t s0 = a->g0 / a->period, s1 = (a->g0 + a->n - 1) / a->period;
    if (s0 == s1) {
        /* all slots in one state (from an input buffer, or the stash in place): one scale and one
         * coefficient passed by value (no device copy, nothing to wait for) */
        const uint64_t local0 = a->g0 - s0 * a->period;
        const size_t es = in_bytes(a->in_dtype);
        const uint64_t e0 = s0 * a->period_valid + (local0 < a->period_valid ? local0 : a->period_valid);
        int le = qm_cuda_launch_amp_one_state((char *)state + a->off * slot_bytes(a->state_dtype),
                                              is_c128(a->state_dtype), a->n, local0,
                                              a->period_valid,
                                              a->scales ? a->scales[s0 - a->first_state] : 1.0,
                                              a->coeffs[s0 - a->first_state],
                                              in ? (const char *)in + (e0 - a->in_first) * es : NULL,
                                              is_f64(a->in_dtype), s);
        if (le != cudaSuccess)
            return cuda_err(st, (cudaError_t)le, "amp_scale launch", dev);
        if (!s)
            CU(st, cudaStreamSynchronize(NULL), "amp_scale", dev);
        return QM_OK;
    }
    /* coefficients, then the scales (when given) in the same allocation */
    const size_t cb = (size_t)a->n_coeffs * sizeof(double);
    cudaError_t e = cudaMalloc((void **)&d_coeffs, a->scales ? 2 * cb : cb);
    if (e != cudaSuccess)
        return cuda_err(st, e, "cudaMalloc (coefficients)", dev);
    if ((e = cudaMemcpy(d_coeffs, a->coeffs, cb, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (a->scales && (e = cudaMemcpy(d_coeffs + a->n_coeffs, a->scales, cb,
                                      cudaMemcpyHostToDevice)) != cudaSuccess)) {
        rc = cuda_err(st, e, "coefficient copy", dev);
        goto done;
    }
    int le = qm_cuda_launch_amp_scale((char *)state + a->off * slot_bytes(a->state_dtype),
                                      is_c128(a->state_dtype), a->n, a->g0, a->period,
                                      a->period_valid, a->first_state, d_coeffs,
                                      a->scales ? d_coeffs + a->n_coeffs : NULL, in,
                                      is_f64(a->in_dtype), a->in_first, s);
    if (le != cudaSuccess) {
        rc = cuda_err(st, (cudaError_t)le, "amp_scale launch", dev);
        goto done;
    }
    /* the coefficients are freed below, so the kernel must have finished */
    if ((e = cudaStreamSynchronize((cudaStream_t)s)) != cudaSuccess)
        rc = cuda_err(st, e, "amp_scale", dev);
done:
    cudaFree(d_coeffs);
    return rc;
}

static qm_code c_amp_batch(void *ctx, int dev, void *state, const void *in, void *sums,
                           const qm_hal_amp_batch_args *a, void *s, qm_status *st)
{
    const size_t es = in_bytes(a->in_dtype);
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_amp_batch_shape(((const cuda_ctx *)ctx)->batch_shape,
                                            (char *)state + a->off * slot_bytes(a->state_dtype),
                                            is_c128(a->state_dtype), a->period,
                                            a->period_valid, a->n_states,
                                            (const char *)in + a->in_off * es,
                                            is_f64(a->in_dtype),
                                            (double *)sums + a->sums_off, s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "amp_batch launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "amp_batch", dev);
    return QM_OK;
}

/* Every op of the amplitude family, the product states and IQP; an op of a later encoding is
 * added here when its case is. */
static bool c_supports_op(void *ctx, qm_hal_op op)
{
    (void)ctx;
    return qm_hal_op_is_amplitude(op) || op == QM_HAL_OP_PRODUCT || op == QM_HAL_OP_IQP_PHASE ||
           op == QM_HAL_OP_WHT || op == QM_HAL_OP_STATE_SUMSQ || op == QM_HAL_OP_IQP ||
           op == QM_HAL_OP_TREE_COMBINE;
}

static qm_code c_product(void *ctx, int dev, void *state, const void *table,
                         const qm_hal_product_args *a, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_product((char *)state + a->off * slot_bytes(a->state_dtype),
                                    is_c128(a->state_dtype), a->n, a->g0, a->qubits,
                                    a->first_state, (const double *)table, a->scale,
                                    k_product(ctx), s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "product launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "product", dev);
    return QM_OK;
}

static qm_code c_iqp_phase(void *ctx, int dev, void *state, const void *table,
                           const qm_hal_iqp_phase_args *a, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_iqp_phase((char *)state + a->off * slot_bytes(a->state_dtype),
                                      is_c128(a->state_dtype), a->n, a->g0, a->qubits,
                                      a->n_coeffs, a->first_state, (const double *)table,
                                      a->scale, k_iqp(ctx), s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "iqp_phase launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "iqp_phase", dev);
    return QM_OK;
}

static qm_code c_wht(void *ctx, int dev, void *state, const void *partner,
                     const qm_hal_wht_args *a, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_wht((char *)state + a->off * slot_bytes(a->state_dtype),
                                is_c128(a->state_dtype), a->n, a->b0, a->b1, partner,
                                a->high ? 1 : 0, k_iqp(ctx), s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "wht launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "wht", dev);
    return QM_OK;
}

/* The norm check's block sums, enqueued on s into the caller's device buffer (already offset). */
static qm_code c_state_sumsq(void *ctx, int dev, const void *state, double *out,
                             const qm_hal_state_sumsq_args *a, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_state_sumsq((const char *)state + a->off * slot_bytes(a->state_dtype),
                                        is_c128(a->state_dtype), a->n, a->g0, a->log2_block, out,
                                        k_sums(ctx, is_c128(a->state_dtype), a->log2_block, 0),
                                        s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "state_sumsq launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "state_sumsq", dev);
    return QM_OK;
}

/* Piece sums from block sums, enqueued on s into the caller's device buffer (already offset). */
static qm_code c_tree_combine(void *ctx, int dev, const void *in, double *out,
                              const qm_hal_tree_combine_args *a, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_tree_combine((const double *)in + a->in_off, a->n_groups, a->log2_group,
                                         out, s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "tree_combine launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "tree_combine", dev);
    return QM_OK;
}

static qm_code c_iqp(void *ctx, int dev, void *state, const void *table, const qm_hal_iqp_args *a,
                     void *s, qm_status *st)
{
    const qm_hal_iqp_phase_args *p = &a->phase;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    int le = qm_cuda_launch_iqp((char *)state + p->off * slot_bytes(p->state_dtype),
                                is_c128(p->state_dtype), p->n, p->g0, p->qubits, p->n_coeffs,
                                p->first_state, (const double *)table, p->scale, a->b1,
                                k_iqp(ctx), s);
    if (le != cudaSuccess)
        return cuda_err(st, (cudaError_t)le, "iqp launch", dev);
    if (!s)
        CU(st, cudaStreamSynchronize(NULL), "iqp", dev);
    return QM_OK;
}

static qm_code c_launch(void *ctx, int dev, qm_hal_op op, const void *params,
                        void *const bufs[QM_HAL_OP_BUFS], void *s, qm_status *st)
{
    void *state = bufs[QM_HAL_OP_BUF_STATE], *out = bufs[QM_HAL_OP_BUF_OUT];
    const void *in = bufs[QM_HAL_OP_BUF_INPUT];
    switch (op) {
    case QM_HAL_OP_AMP_STASH: return c_stash(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_AMP_SUMSQ: return c_sumsq(ctx, dev, state, in, params, st);
    case QM_HAL_OP_AMP_SUMSQ_DEV: return c_sumsq_dev(ctx, dev, state, in, params, out, s, st);
    case QM_HAL_OP_AMP_SCAN: return c_scan(ctx, dev, state, params, st);
    case QM_HAL_OP_AMP_SCALE: return c_amp_scale(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_AMP_BATCH: return c_amp_batch(ctx, dev, state, in, out, params, s, st);
    case QM_HAL_OP_PRODUCT: return c_product(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_IQP_PHASE: return c_iqp_phase(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_WHT: return c_wht(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_STATE_SUMSQ: return c_state_sumsq(ctx, dev, state, out, params, s, st);
    case QM_HAL_OP_IQP: return c_iqp(ctx, dev, state, in, params, s, st);
    case QM_HAL_OP_TREE_COMBINE: return c_tree_combine(ctx, dev, in, out, params, s, st);
    case QM_HAL_OP_COUNT_: break;
    }
    return qm_fail(st, QM_E_UNSUPPORTED, "op %d is not a CUDA kernel", (int)op);
}

/* ---- events: the device's work ordered across streams without the host waiting ---------------- */

static qm_code c_event_create(void *ctx, int dev, void **out, qm_status *st)
{
    cudaEvent_t ev = NULL;
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate", dev);
    *out = ev;
    return QM_OK;
}

static void c_event_destroy(void *ctx, int dev, void *ev)
{
    if (cudaSetDevice(PH(ctx, dev)) != cudaSuccess || cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess)
        (void)cudaGetLastError();
}

static qm_code c_event_record(void *ctx, int dev, void *ev, void *s, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s), "cudaEventRecord", dev);
    return QM_OK;
}

static qm_code c_stream_wait(void *ctx, int dev, void *s, void *ev, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0), "cudaStreamWaitEvent", dev);
    return QM_OK;
}

static qm_code c_event_sync(void *ctx, int dev, void *ev, qm_status *st)
{
    CU(st, cudaSetDevice(PH(ctx, dev)), "cudaSetDevice", dev);
    CU(st, cudaEventSynchronize((cudaEvent_t)ev), "cudaEventSynchronize", dev);
    return QM_OK;
}

/* ---- page-locked host staging ------------------------------------------------------------------ */

/* Page-locked memory as anonymous memory on 2 MiB pages, registered with the driver: measured on
 * the H200 host (session 8; its raw output was lost), cudaHostAlloc of 64 MiB took 33-50
 * ms (512 MiB: 250-340 ms), while 2 MiB-aligned memory advised to use huge pages and registered
 * took 5-11 ms (512 MiB: 36-39 ms). Every staging buffer (the ingest ring, the output staging, a
 * stream's batches) pays this once, on the critical path of a short encode. cudaHostAlloc stays
 * the fallback when registering fails (a driver or kernel that refuses). The registered blocks
 * are listed (few live at once), so that free knows which way a pointer was made. */
#define QM_HOST_PAGE ((size_t)2 << 20)

typedef struct host_block {
    void *p;
    size_t bytes;
    struct host_block *next;
} host_block;

static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static host_block *host_blocks;

/* Spares: memory made ready for page-locking ahead of time (qm_hal_cuda_host_prepare), on 2 MiB
 * pages and touched, not yet registered. Measured on the H200 host (bench/results
 * 2026-12-04-s12-h200-run2-pagelock.txt): of the 11-15 ms that page-locking 64 MiB of new memory
 * takes, all but 1.4-2.2 ms is the page faults (the kernel zeroing the pages); registering memory
 * already touched is the rest. `qmesh encode --backend cuda` prepares its staging while the CUDA
 * context is created, when its thread would otherwise wait. */
typedef enum { SPARE_TOUCHED, SPARE_REGISTERING, SPARE_REGISTERED } spare_state;

typedef struct host_spare {
    void *p;
    size_t bytes;
    spare_state state; /* registered ahead by host_register_spares, or given back registered */
    bool given;        /* given back (c_host_free), not prepared ahead for a later allocation */
    struct host_spare *next;
} host_spare;

static host_spare *host_spares;
static pthread_cond_t host_cv = PTHREAD_COND_INITIALIZER; /* a spare's registration ended */

/* A spare of at least `whole` bytes and at most twice that (no large waste), unlinked; its bytes
 * in *bytes, *registered whether it is page-locked already. One being registered on the start-up
 * thread (host_register_spares) is waited for: what is left of its registration is less than a
 * registration here.
 * NULL when none fits. */
static void *spare_take(size_t whole, size_t *bytes, bool *registered)
{
    void *p = NULL;
    pthread_mutex_lock(&host_mu);
    for (host_spare **at = &host_spares; *at;) {
        host_spare *sp = *at;
        if (sp->bytes < whole || sp->bytes / 2 > whole) {
            at = &sp->next;
            continue;
        }
        if (sp->state == SPARE_REGISTERING) {
            pthread_cond_wait(&host_cv, &host_mu);
            at = &host_spares; /* the list may have changed: look again */
            continue;
        }
        *at = sp->next;
        p = sp->p;
        *bytes = sp->bytes;
        *registered = sp->state == SPARE_REGISTERED;
        free(sp);
        break;
    }
    pthread_mutex_unlock(&host_mu);
    return p;
}

static void host_register_spares(void)
{
    pthread_mutex_lock(&host_mu);
    for (host_spare *sp = host_spares; sp; sp = sp->next) {
        if (sp->state != SPARE_TOUCHED)
            continue;
        sp->state = SPARE_REGISTERING; /* stays listed (and unfreed) until it ends */
        pthread_mutex_unlock(&host_mu);
        const bool ok = cudaHostRegister(sp->p, sp->bytes, cudaHostRegisterPortable) == cudaSuccess;
        if (!ok)
            (void)cudaGetLastError(); /* registered at its allocation instead, which reports */
        pthread_mutex_lock(&host_mu);
        sp->state = ok ? SPARE_REGISTERED : SPARE_TOUCHED;
        pthread_cond_broadcast(&host_cv);
    }
    pthread_mutex_unlock(&host_mu);
}

void qm_hal_cuda_host_prepare(uint64_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - QM_HOST_PAGE)
        return;
    const size_t whole = ((size_t)bytes + QM_HOST_PAGE - 1) / QM_HOST_PAGE * QM_HOST_PAGE;
    host_spare *sp = malloc(sizeof *sp);
    void *b = sp ? qm_hal_big_alloc(whole) : NULL; /* 2 MiB-aligned, huge pages advised */
    if (!b) {
        free(sp);
        return; /* only a head start: the allocation will make its own memory */
    }
    for (size_t at = 0; at < whole; at += 4096) /* one write per page faults every page in */
        ((volatile char *)b)[at] = 0;
    *sp = (host_spare){.p = b, .bytes = whole, .state = SPARE_TOUCHED};
    pthread_mutex_lock(&host_mu);
    host_spare **at = &host_spares;
    while (*at) /* in the order prepared: registered ahead in that order (the ring first) */
        at = &(*at)->next;
    *at = sp;
    pthread_mutex_unlock(&host_mu);
}

int qm_hal_cuda_host_spares(uint64_t *bytes, int *registered)
{
    int n = 0, reg = 0;
    uint64_t b = 0;
    pthread_mutex_lock(&host_mu);
    for (const host_spare *sp = host_spares; sp; sp = sp->next, ++n) {
        b += sp->bytes;
        reg += sp->state == SPARE_REGISTERED;
    }
    pthread_mutex_unlock(&host_mu);
    if (bytes)
        *bytes = b;
    if (registered)
        *registered = reg;
    return n;
}

void qm_hal_cuda_host_release(void)
{
    pthread_mutex_lock(&host_mu);
    for (bool busy = true; busy;) { /* none left mid-registration */
        busy = false;
        for (const host_spare *sp = host_spares; sp; sp = sp->next)
            busy = busy || sp->state == SPARE_REGISTERING;
        if (busy)
            pthread_cond_wait(&host_cv, &host_mu);
    }
    host_spare *sp = host_spares;
    host_spares = NULL;
    pthread_mutex_unlock(&host_mu);
    while (sp) {
        host_spare *next = sp->next;
        if (sp->state == SPARE_REGISTERED && cudaHostUnregister(sp->p) != cudaSuccess)
            (void)cudaGetLastError();
        free(sp->p);
        free(sp);
        sp = next;
    }
}

static void *host_register(uint64_t bytes)
{
    if (bytes > SIZE_MAX - QM_HOST_PAGE)
        return NULL;
    size_t whole = ((size_t)bytes + QM_HOST_PAGE - 1) / QM_HOST_PAGE * QM_HOST_PAGE;
    host_block *blk = malloc(sizeof *blk);
    bool registered = false;
    void *b = blk ? spare_take(whole, &whole, &registered) : NULL;
    if (blk && !b)
        b = qm_hal_big_alloc(whole); /* 2 MiB-aligned, huge pages advised */
    if (!b) {
        free(blk);
        return NULL;
    }
    if (!registered && cudaHostRegister(b, whole, cudaHostRegisterPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        free(b);
        free(blk);
        return NULL;
    }
    blk->p = b;
    blk->bytes = whole;
    pthread_mutex_lock(&host_mu);
    blk->next = host_blocks;
    host_blocks = blk;
    pthread_mutex_unlock(&host_mu);
    return b;
}

/* The block's bytes (and the block forgotten) when p was made by host_register, else 0. */
static size_t host_forget(void *p)
{
    host_block *found = NULL;
    pthread_mutex_lock(&host_mu);
    for (host_block **at = &host_blocks; *at; at = &(*at)->next)
        if ((*at)->p == p) {
            found = *at;
            *at = found->next;
            break;
        }
    pthread_mutex_unlock(&host_mu);
    const size_t bytes = found ? found->bytes : 0;
    free(found);
    return bytes;
}

static qm_code c_host_alloc(void *ctx, uint64_t bytes, void **out, qm_status *st)
{
    (void)ctx;
    void *p = host_register(bytes);
    if (p) {
        *out = p;
        return QM_OK;
    }
    cudaError_t e = cudaHostAlloc(&p, (size_t)bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return qm_fail_backend(st, QM_E_NOMEM, (int)e, "cudaHostAlloc of %llu bytes failed: %s (%s)",
                               (unsigned long long)bytes, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    *out = p;
    return QM_OK;
}

/* A registered block given back stays registered, kept as a spare (at most QM_HOST_KEPT blocks
 * given back; the spares prepared ahead and not taken yet do not count: while an encode with an
 * output ingests, its output staging waits as a registered spare, and in session 26, when that
 * was 8 buffers, counting them made the ring's give-back at the end of the ingest unregister it on
 * the spot, 1.2 ms of its staging on an H100) for the next allocation of its size, and is unregistered by
 * qm_hal_cuda_host_release (at the end of an encode, or a context's close) or when a backend
 * closes: cudaHostUnregister of the ingest ring's 64 MiB took 1.4-2.2 ms at the end of every ingest
 * on an H100, and unregistering on another thread instead held up the CUDA calls of the norm that
 * follows by as much (bench/results/2026-12-06-session21.md). */
#define QM_HOST_KEPT 8

static void c_host_free(void *ctx, void *p)
{
    (void)ctx;
    if (!p)
        return;
    const size_t bytes = host_forget(p);
    if (bytes) {
        host_spare *sp = malloc(sizeof *sp);
        int kept = 0;
        pthread_mutex_lock(&host_mu);
        host_spare **at = &host_spares;
        for (; *at; at = &(*at)->next)
            kept += (*at)->state == SPARE_REGISTERED && (*at)->given;
        if (sp && kept < QM_HOST_KEPT) {
            *sp = (host_spare){.p = p, .bytes = bytes, .state = SPARE_REGISTERED, .given = true};
            *at = sp;
            sp = NULL;
            p = NULL;
        }
        pthread_mutex_unlock(&host_mu);
        free(sp);
        if (p) { /* more than QM_HOST_KEPT kept, or no memory for the entry: now */
            if (cudaHostUnregister(p) != cudaSuccess)
                (void)cudaGetLastError();
            free(p);
        }
        return;
    }
    if (cudaFreeHost(p) != cudaSuccess)
        (void)cudaGetLastError();
}

static bool c_host_is_pinned(void *ctx, const void *p)
{
    (void)ctx;
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return at.type == cudaMemoryTypeHost;
}

/* Caller memory read in place: device (or managed) memory of this device's GPU only. */
static qm_code c_wrap_device(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                             qm_status *st)
{
    (void)bytes;
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return qm_fail(st, QM_E_UNSUPPORTED, "%p is not memory the CUDA runtime knows", ptr);
    }
    if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged)
        return qm_fail(st, QM_E_UNSUPPORTED, "%p is host memory, not memory of GPU %d", ptr,
                       PH(ctx, dev));
    if (at.device != PH(ctx, dev))
        return qm_fail(st, QM_E_UNSUPPORTED, "%p is memory of GPU %d, not of this device's GPU %d",
                       ptr, at.device, PH(ctx, dev));
    *out = (void *)(uintptr_t)ptr;
    return QM_OK;
}

static void c_destroy(void *ctx)
{
    cuda_ctx *c = ctx;
    if (!c)
        return;
    qm_hal_cuda_host_release(); /* page-locked blocks given back and kept, spares not taken */
    (void)keep_release(c, -1);
    pthread_mutex_destroy(&c->keep_lock);
    for (int p = 0; p < 64; ++p)
        if (c->scratch[p] && cudaSetDevice(p) == cudaSuccess)
            (void)cudaFree(c->scratch[p]);
    (void)cudaGetLastError();
    free(c->info);
    free(c->peer);
    free(c->phys);
    free(c);
}

static const qm_hal_ops cuda_ops = {
    .kind = QM_HAL_CUDA,
    .abi = 7, /* the HAL ABI this table was written against (hal_impl.h) */
    .destroy = c_destroy,
    .device = {
        .count = c_device_count,
        .info = c_device_info,
        .peer = c_peer,
        .buf_alloc = c_buf_alloc,
        .buf_free = c_buf_free,
        .host_alloc = c_host_alloc,
        .host_free = c_host_free,
        .host_is_pinned = c_host_is_pinned,
        .wrap_device = c_wrap_device,
        .trim = c_trim,
        .sync = c_device_sync,
    },
    .stream = {
        .create = c_stream_create,
        .destroy = c_stream_destroy,
        .sync = c_stream_sync,
        .event_create = c_event_create,
        .event_destroy = c_event_destroy,
        .event_record = c_event_record,
        .wait = c_stream_wait,
        .event_sync = c_event_sync,
        .copy_h2d = c_copy_h2d,
        .copy_d2h = c_copy_d2h,
        .copy_d2d = c_copy_d2d,
        .copy_peer = c_copy_peer,
    },
    .kernel = {
        .supports_op = c_supports_op,
        .launch = c_launch,
    },
};

qm_code qm_hal_cuda_open(qm_hal **out, qm_status *st) { return qm_hal_cuda_open_logical(0, out, st); }

qm_code qm_hal_cuda_open_logical(int n_logical, qm_hal **out, qm_status *st)
{
    return qm_hal_cuda_open_logical_at(0, n_logical, out, st);
}

qm_code qm_hal_cuda_open_logical_at(int first_gpu, int n_logical, qm_hal **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!out)
        return qm_fail(st, QM_E_ARG, "cuda: out must not be NULL");
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return qm_fail_backend(st, QM_E_UNSUPPORTED, (int)e, "cuda: no CUDA device (%s)",
                               e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
    }
    if (n_logical < 0 || n_logical > 4096)
        return qm_fail(st, QM_E_ARG, "cuda: %d logical devices is not a mesh (0 to 4096)", n_logical);
    if (first_gpu < 0)
        return qm_fail(st, QM_E_ARG, "cuda: the first GPU must be >= 0 (got %d)", first_gpu);
    const int nl = n_logical ? n_logical : n;
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return qm_fail(st, QM_E_NOMEM, "cuda: out of host memory");
    pthread_mutex_init(&c->keep_lock, NULL);
    const char *keep_env = getenv("QM_CUDA_KEEP");
    c->keep_on = !(keep_env && strcmp(keep_env, "0") == 0);
    /* tuning is read here, once, never by the kernels */
    const char *shape_env = getenv("QM_CUDA_BATCH_SHAPE");
    c->batch_shape = shape_env && shape_env[0] >= '0' && shape_env[0] <= '5' && !shape_env[1]
                         ? shape_env[0] - '0' : 0;
    const char *kernels_env = getenv("QM_CUDA_KERNELS");
    c->kernels = !kernels_env                           ? QM_CUDA_KERNELS_DEFAULT
                 : strcmp(kernels_env, "legacy") == 0 ? QM_CUDA_KERNELS_LEGACY
                 : strcmp(kernels_env, "round1") == 0 ? QM_CUDA_KERNELS_ROUND1
                 : strcmp(kernels_env, "round2") == 0 ? QM_CUDA_KERNELS_CURRENT
                 : strcmp(kernels_env, "round3") == 0 ? QM_CUDA_KERNELS_ROUND3
                 : strcmp(kernels_env, "round4") == 0 ? QM_CUDA_KERNELS_ROUND4
                 : strcmp(kernels_env, "round5") == 0 ? QM_CUDA_KERNELS_ROUND5
                                                      : QM_CUDA_KERNELS_DEFAULT;
    c->n_dev = nl;
    c->phys = calloc((size_t)nl, sizeof *c->phys);
    c->info = calloc((size_t)nl, sizeof *c->info);
    c->peer = calloc((size_t)nl * (size_t)nl, 1);
    if (!c->phys || !c->info || !c->peer) {
        c_destroy(c);
        return qm_fail(st, QM_E_NOMEM, "cuda: out of host memory for %d devices", nl);
    }
    unsigned char *phys_peer = calloc((size_t)n * (size_t)n, 1);
    int *shares = calloc((size_t)n, sizeof *shares); /* logical devices per GPU */
    if (!phys_peer || !shares) {
        free(phys_peer);
        free(shares);
        c_destroy(c);
        return qm_fail(st, QM_E_NOMEM, "cuda: out of host memory");
    }
    int most = 0;
    for (int i = 0; i < nl; ++i) {
        c->phys[i] = (int)(((long long)first_gpu + i) % n);
        if (++shares[c->phys[i]] > most)
            most = shares[c->phys[i]];
    }
    for (int d = 0; d < n; ++d) {
        if ((e = cudaSetDevice(d)) != cudaSuccess)
            break;
        for (int o = 0; o < n; ++o) {
            int can = 0;
            if (o != d && cudaDeviceCanAccessPeer(&can, d, o) == cudaSuccess && can) {
                cudaError_t pe = cudaDeviceEnablePeerAccess(o, 0);
                if (pe == cudaSuccess || pe == cudaErrorPeerAccessAlreadyEnabled)
                    phys_peer[d * n + o] = 1;
                (void)cudaGetLastError();
            }
        }
    }
    for (int i = 0; i < nl; ++i) {
        const int d = c->phys[i];
        struct cudaDeviceProp p;
        size_t free_b = 0, total_b = 0;
        if ((e = cudaGetDeviceProperties(&p, d)) != cudaSuccess ||
            (e = cudaSetDevice(d)) != cudaSuccess ||
            (e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
            free(phys_peer);
            free(shares);
            c_destroy(c);
            return cuda_err(st, e, "device discovery", d);
        }
        qm_hal_device_info *in = &c->info[i];
        int k = 0; /* earlier logical devices on the same GPU */
        for (int j = 0; j < i; ++j)
            k += c->phys[j] == d;
        if (most == 1)
            snprintf(in->id, sizeof in->id, "cuda:%d", d);
        else
            snprintf(in->id, sizeof in->id, "cuda:%d.%d", d, k);
        snprintf(in->name, sizeof in->name, "%.95s", p.name);
        /* a GPU shared by several logical devices: each gets an equal slice */
        in->memory_bytes = total_b / (size_t)shares[d];
        in->usable_bytes = free_b / (size_t)shares[d];
        int mem_clock_khz = 0, bus_bits = p.memoryBusWidth;
        (void)cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d);
        in->hbm_bw_bytes_per_s = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0);
        in->host_bw_bytes_per_s = 0;
        in->numa = -1;
        in->sm_count = p.multiProcessorCount;
        in->memory = QM_HAL_MEMORY_CUDA;
        in->cuda_ordinal = d;
    }
    for (int i = 0; i < nl; ++i)
        for (int j = 0; j < nl; ++j)
            c->peer[i * nl + j] = i != j && (c->phys[i] == c->phys[j] ||
                                             phys_peer[c->phys[i] * n + c->phys[j]]);
    free(phys_peer);
    free(shares);
    return qm_hal_create(&cuda_ops, c, out, st);
}
