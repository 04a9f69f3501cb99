/* materialize.c — the materialize stage: a checked layout and host input in, a state out.
 *
 * Steps, per request: validate the input and layout; allocate each shard's output buffer and a
 * staging buffer for its slice of the input (a shard never receives more than its own range);
 * copy the slices in; sum squares over the canonical aligned pieces of each shard's range; merge
 * the piece sums into the global tree in index order (bit-identical for every page-aligned layout,
 * and for unaligned ones too, since pieces merge into the same tree); retry with a power-of-two
 * scale when the fast sum overflows or underflows; write amplitudes; free the staging buffers.
 * Must not: allocate before validation, leave any buffer behind on failure, or read the input
 * outside [0, n).
 * Known wart: devices are driven one after another from one host thread (the sim kernels use every
 * core themselves); the CUDA backend will enqueue per-device streams instead.
 */
#include "materialize_internal.h"
#include "qm_math.h"
#include "state_internal.h"
#include "status_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct piece {
    uint64_t off;   /* global index of the first element */
    unsigned log2n; /* 2^log2n elements */
    double sum;
} piece;

/* Smallest power of two exponent k such that pos is aligned to 2^k and [pos, pos+2^k) fits. */
static unsigned piece_log(uint64_t pos, uint64_t end)
{
    unsigned k = pos == 0 ? 63 : (unsigned)__builtin_ctzll(pos);
    while (k > 0 && ((uint64_t)1 << k) > end - pos)
        --k;
    return k;
}

/* Number of canonical pieces of [start, end) and the largest piece's log2 size. */
static int count_pieces(uint64_t start, uint64_t end, unsigned *max_log)
{
    int n = 0;
    for (uint64_t pos = start; pos < end; ++n) {
        unsigned k = piece_log(pos, end);
        if (k > *max_log)
            *max_log = k;
        pos += (uint64_t)1 << k;
    }
    return n;
}

static qm_code validate_layout(unsigned qubits, const qm_shard_spec *shards, int n_shards,
                               int n_dev, bool *replicated, qm_status *st)
{
    const uint64_t n_amps = (uint64_t)1 << qubits;
    if (n_shards < 1 || !shards)
        return qm_fail(st, QM_E_ARG, "materialize: a layout needs at least 1 shard (got %d)",
                       n_shards);
    *replicated = n_shards > 1;
    for (int i = 0; i < n_shards; ++i)
        if (shards[i].start != 0 || shards[i].end != n_amps)
            *replicated = false;
    uint64_t pos = 0;
    for (int i = 0; i < n_shards; ++i) {
        const qm_shard_spec *s = &shards[i];
        if (s->device < 0 || s->device >= n_dev)
            return qm_fail(st, QM_E_ARG, "materialize: shard %d names device %d, out of range "
                           "(the mesh has %d devices)", i, s->device, n_dev);
        if (s->start >= s->end || s->end > n_amps)
            return qm_fail(st, QM_E_SHARDS, "materialize: shard %d range [%llu, %llu) is empty or "
                           "outside [0, %llu)", i, (unsigned long long)s->start,
                           (unsigned long long)s->end, (unsigned long long)n_amps);
        if (!*replicated) {
            if (s->start != pos)
                return qm_fail(st, QM_E_SHARDS, "materialize: shard %d starts at %llu but the "
                               "previous shard ends at %llu", i, (unsigned long long)s->start,
                               (unsigned long long)pos);
            pos = s->end;
        }
    }
    if (!*replicated && pos != n_amps)
        return qm_fail(st, QM_E_SHARDS, "materialize: shards cover [0, %llu) of [0, %llu)",
                       (unsigned long long)pos, (unsigned long long)n_amps);
    return QM_OK;
}

static qm_code validate_input(unsigned qubits, qm_dtype out_dtype, const qm_amp_input *in,
                              qm_status *st)
{
    if (!in)
        return qm_fail(st, QM_E_ARG, "encode: input must not be NULL");
    if (in->n == 0)
        return qm_fail(st, QM_E_INPUT, "encode: input cannot be empty (0 values)");
    if (qubits < 1 || qubits > 62)
        return qm_fail(st, QM_E_QUBITS, "encode: qubits must be at least 1 and at most 62 "
                       "(got %u)", qubits);
    if (in->n > ((uint64_t)1 << qubits))
        return qm_fail(st, QM_E_INPUT, "encode: input length %llu exceeds state vector size "
                       "%llu (%u qubits); use at least %u qubits", (unsigned long long)in->n,
                       (unsigned long long)((uint64_t)1 << qubits), qubits,
                       (unsigned)(64 - __builtin_clzll(in->n - 1)));
    if (!in->data)
        return qm_fail(st, QM_E_ARG, "encode: input data must not be NULL");
    if (in->dtype != QM_DTYPE_FLOAT32 && in->dtype != QM_DTYPE_FLOAT64)
        return qm_fail(st, QM_E_DTYPE, "encode: input dtype must be float32 or float64 (got %s)",
                       qm_dtype_name(in->dtype) ? qm_dtype_name(in->dtype) : "unknown");
    if (out_dtype != QM_DTYPE_COMPLEX64 && out_dtype != QM_DTYPE_COMPLEX128)
        return qm_fail(st, QM_E_DTYPE, "encode: state dtype must be complex64 or complex128 "
                       "(got %s)", qm_dtype_name(out_dtype) ? qm_dtype_name(out_dtype) : "unknown");
    return QM_OK;
}

/* Valid input elements inside the global range [lo, hi). */
static uint64_t valid_in(uint64_t n_input, uint64_t lo, uint64_t hi)
{
    if (n_input <= lo)
        return 0;
    return (n_input < hi ? n_input : hi) - lo;
}

/* Sums of squares of every piece of every (counted) shard, appended in global index order. */
static qm_code sum_pieces(qm_hal *hal, const qm_shard_spec *shards, int n_used,
                          qm_hal_buf *const *staged, const qm_amp_input *in, double scale,
                          piece *pieces, int *n_pieces, double *block_sums, qm_status *st)
{
    int np = 0;
    for (int i = 0; i < n_used; ++i) {
        const qm_shard_spec *s = &shards[i];
        for (uint64_t pos = s->start; pos < s->end;) {
            unsigned k = piece_log(pos, s->end);
            uint64_t len = (uint64_t)1 << k;
            uint64_t nv = valid_in(in->n, pos, pos + len);
            double sum = 0.0;
            if (nv > 0) {
                unsigned lb = k < QM_RED_LOG2_BLOCK ? k : QM_RED_LOG2_BLOCK;
                qm_hal_sumsq_args a = {
                    .in = staged[i], .in_dtype = in->dtype, .in_off = pos - s->start,
                    .n_valid = nv, .log2_block = lb, .n_blocks = (uint64_t)1 << (k - lb),
                    .scale = scale, .out_sums = block_sums,
                };
                /* only the blocks that hold data are computed; the rest are exact zeros */
                uint64_t data_blocks = (nv + ((uint64_t)1 << lb) - 1) >> lb;
                a.n_blocks = data_blocks;
                qm_code rc = qm_hal_sumsq_sync(hal, &a, st);
                if (rc != QM_OK)
                    return qm_status_prefix(st, "encode: shard %d", i);
                for (uint64_t b = data_blocks; b < ((uint64_t)1 << (k - lb)); ++b)
                    block_sums[b] = 0.0;
                sum = qm_tree_combine(block_sums, (uint64_t)1 << (k - lb));
            }
            pieces[np++] = (piece){.off = pos, .log2n = k, .sum = sum};
            pos += len;
        }
    }
    *n_pieces = np;
    return QM_OK;
}

/* Merge pieces (in index order) into the root of the global tree; E-INTERNAL if they do not form
 * exactly [0, 2^qubits). */
static qm_code merge_pieces(piece *p, int n, unsigned qubits, double *root, qm_status *st)
{
    int top = 0;
    for (int i = 0; i < n; ++i) {
        p[top++] = p[i];
        while (top >= 2) {
            piece *l = &p[top - 2], *r = &p[top - 1];
            uint64_t len = (uint64_t)1 << l->log2n;
            if (l->log2n != r->log2n || r->off != l->off + len || (l->off & (2 * len - 1)) != 0)
                break;
            l->sum = l->sum + r->sum;
            l->log2n++;
            --top;
        }
    }
    QM_CHECK(st, top == 1 && p[0].off == 0 && p[0].log2n == qubits);
    *root = p[0].sum;
    return QM_OK;
}

#define QM_FAST_SUM_MIN 0x1p-968 /* below this the fast sum may have lost bits to underflow */

qm_code qm_materialize_amplitude(qm_hal *hal, unsigned qubits, qm_dtype out_dtype,
                                 const qm_shard_spec *shards, int n_shards, const qm_amp_input *in,
                                 qm_state **out, qm_status *st)
{
    qm_code rc;
    qm_state *state = NULL;
    qm_hal_buf **staged = NULL;
    piece *pieces = NULL;
    double *block_sums = NULL;
    bool replicated = false;

    if (out)
        *out = NULL;
    if (!hal || !out)
        return qm_fail(st, QM_E_ARG, "encode: hal and out must not be NULL");
    if ((rc = validate_input(qubits, out_dtype, in, st)) != QM_OK)
        return rc;
    if ((rc = validate_layout(qubits, shards, n_shards, qm_hal_device_count(hal), &replicated,
                              st)) != QM_OK)
        return rc;

    /* host bookkeeping first: a failure here touches no device */
    const int n_norm = replicated ? 1 : n_shards; /* shards whose pieces make the tree */
    int max_pieces = 0;
    unsigned max_log = 0;
    for (int i = 0; i < n_norm; ++i)
        max_pieces += count_pieces(shards[i].start, shards[i].end, &max_log);
    const size_t max_blocks =
        (size_t)1 << (max_log > QM_RED_LOG2_BLOCK ? max_log - QM_RED_LOG2_BLOCK : 0);
    staged = calloc((size_t)n_shards, sizeof *staged);
    pieces = malloc((size_t)max_pieces * sizeof *pieces);
    block_sums = malloc(max_blocks * sizeof *block_sums);
    if (!staged || !pieces || !block_sums) {
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n_shards);
        goto done;
    }
    if ((rc = qm_state_create_empty(hal, qubits, out_dtype, n_shards, &state, st)) != QM_OK)
        goto done;

    const uint64_t osz = qm_dtype_size(out_dtype), isz = qm_dtype_size(in->dtype);
    for (int i = 0; i < n_shards; ++i) {
        const qm_shard_spec *s = &shards[i];
        qm_state_shard *sh = &state->shards[i];
        sh->rank = s->rank;
        sh->device = s->device;
        sh->start = s->start;
        sh->end = s->end;
        if ((rc = qm_hal_buf_alloc(hal, s->device, (s->end - s->start) * osz, &sh->buf, st)) != QM_OK)
            goto fail_shard;
        uint64_t nv = valid_in(in->n, s->start, s->end);
        if (nv == 0)
            continue;
        if ((rc = qm_hal_buf_alloc(hal, s->device, nv * isz, &staged[i], st)) != QM_OK)
            goto fail_shard;
        rc = qm_hal_copy_h2d(hal, staged[i], 0, (const char *)in->data + s->start * isz, nv * isz,
                             NULL, st);
        if (rc != QM_OK)
            goto fail_shard;
        continue;
    fail_shard:
        qm_status_prefix(st, "encode: shard %d", i);
        goto done;
    }

    int np = 0;
    double sum = 0.0, scale = 1.0;
    if ((rc = sum_pieces(hal, shards, n_norm, staged, in, 1.0, pieces, &np, block_sums, st)) != QM_OK)
        goto done;
    if ((rc = merge_pieces(pieces, np, qubits, &sum, st)) != QM_OK)
        goto done;
    if (!(isfinite(sum) && sum >= QM_FAST_SUM_MIN)) {
        /* slow path: find bad values, or rescale by a power of two and sum again */
        double max_abs = 0.0;
        for (int i = 0; i < n_norm; ++i) {
            uint64_t nv = valid_in(in->n, shards[i].start, shards[i].end);
            if (nv == 0)
                continue;
            qm_hal_scan_result r;
            if ((rc = qm_hal_scan_sync(hal, staged[i], in->dtype, 0, nv, &r, st)) != QM_OK) {
                qm_status_prefix(st, "encode: shard %d", i);
                goto done;
            }
            if (r.first_nonfinite != UINT64_MAX) {
                uint64_t g = shards[i].start + r.first_nonfinite;
                double v = in->dtype == QM_DTYPE_FLOAT64 ? ((const double *)in->data)[g]
                                                         : (double)((const float *)in->data)[g];
                rc = qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: input[%llu] is %s",
                             (unsigned long long)g, isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf"));
                goto done;
            }
            if (r.max_abs > max_abs)
                max_abs = r.max_abs;
        }
        if (max_abs == 0.0) {
            rc = qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: all %llu input values "
                         "are zero", (unsigned long long)in->n);
            goto done;
        }
        int e;
        (void)frexp(max_abs, &e);
        scale = ldexp(1.0, -e > 1023 ? 1023 : -e);
        if ((rc = sum_pieces(hal, shards, n_norm, staged, in, scale, pieces, &np, block_sums, st)) != QM_OK)
            goto done;
        if ((rc = merge_pieces(pieces, np, qubits, &sum, st)) != QM_OK)
            goto done;
        if (!(isfinite(sum) && sum > 0.0)) {
            rc = qm_fail(st, QM_E_INTERNAL, "encode: rescaled sum of squares is %g (scale 2^%d)",
                         sum, -e);
            goto done;
        }
    }
    const double root = sqrt(sum);
    const double coeff = scale / root;
    state->norm = root / scale;

    for (int i = 0; i < n_shards; ++i) {
        const qm_shard_spec *s = &shards[i];
        qm_hal_amp_write_args a = {
            .out = state->shards[i].buf, .out_dtype = out_dtype, .out_off = 0,
            .n_out = s->end - s->start, .in = staged[i], .in_dtype = in->dtype, .in_off = 0,
            .n_valid = valid_in(in->n, s->start, s->end), .coeff = coeff,
        };
        if ((rc = qm_hal_amp_write(hal, &a, NULL, st)) != QM_OK) {
            qm_status_prefix(st, "encode: shard %d", i);
            goto done;
        }
    }
    rc = QM_OK;

done:
    for (int i = 0; staged && i < n_shards; ++i)
        qm_hal_buf_free(hal, staged[i]);
    free(staged);
    free(pieces);
    free(block_sums);
    if (rc != QM_OK) {
        qm_state_destroy(state);
        state = NULL;
    }
    *out = state;
    return rc;
}
