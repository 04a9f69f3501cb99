#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* featuremap.c — the materialize stage of the feature-map encodings: angle, basis, phase, iqp-z
 * (product states) and iqp (a phase per index, then a Walsh-Hadamard transform: iqp.c).
 *
 * In: a checked layout (the shards of this rank), the input (B samples of F values: angle and
 * phase F = n angles, basis F = 1 index), the encoding. Out: a state whose every amplitude is a
 * product of one factor per qubit (docs/encodings.md):
 *   angle  a(i) = prod_k (bit_k(i) ? sin x_k : cos x_k)
 *   basis  a(i) = [i == j]
 *   phase  a(i) = 2^(-n/2) exp(i sum_k x_k bit_k(i))
 *   iqp-z  a(i) = prod_k (1 + (-1)^bit_k(i) exp(i x_k)) / 2  (2^-n sum_x exp(i sum_k x_k bit_k(x))
 *          (-1)^popcount(x & i) factored: the sum over x is a product of sums over each bit)
 * Each shard reads only the samples its range touches (every value of each), checks them (NaN or
 * Inf, a basis index that is not an integer in [0, 2^n): E-INPUT naming the sample and the
 * value; the indices of an integer input are read and checked as 64-bit integers, never rounded
 * through float64), builds the per-qubit factors on the host — cos, sin of each angle (iqp-z:
 * of each half value), computed once here for every backend — and hands them to the product op (hal_ops.h), which multiplies them in a
 * fixed order; so the state is bit-identical on the simulator and CUDA, on any layout, any thread
 * and any rank count. These states are normalized by construction (to rounding): there is no norm
 * pass; the encode job's norm check still measures every state.
 * IQP: the shard's table is its samples' values themselves; the iqp op writes 2^-n exp(i phi(x))
 * and runs the stages of the bits the shard holds alone (a backend without it: the iqp_phase and
 * wht ops); iqp.c runs the higher stages as exchanges between shards (docs/encodings.md).
 * Must not: allocate before validation, leave a buffer behind on failure, read a sample no shard
 * of this rank touches.
 */
#include "comm.h"
#include "ingest.h"
#include "materialize_internal.h"
#include "plan.h"
#include "state_internal.h"
#include "status_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

bool qm_encoding_is_product(qm_encoding e)
{
    return e == QM_ENCODING_ANGLE || e == QM_ENCODING_BASIS || e == QM_ENCODING_PHASE ||
           e == QM_ENCODING_IQP_Z;
}

/* The basis indices of samples [s0, s0 + count) of an integer input, exactly (read_int): each
 * checked against [0, 2^qubits) as an integer and kept in idx. */
static qm_code read_indices(const qm_amp_input *in, unsigned qubits, uint64_t s0, uint64_t count,
                            uint64_t *idx, qm_status *st)
{
    qm_code rc = in->read_int(in->read_int_ctx, s0, count, idx, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "encode: reading input [%llu, %llu)", (unsigned long long)s0,
                                (unsigned long long)(s0 + count));
    const uint64_t N = (uint64_t)1 << qubits; /* qubits <= 62 (the request's check) */
    for (uint64_t i = 0; i < count; ++i) {
        const bool neg = in->int_signed && (int64_t)idx[i] < 0;
        if (neg || idx[i] >= N) {
            char v[32];
            if (neg)
                snprintf(v, sizeof v, "%lld", (long long)(int64_t)idx[i]);
            else
                snprintf(v, sizeof v, "%llu", (unsigned long long)idx[i]);
            return qm_fail(st, QM_E_INPUT, "encode: sample %llu: basis index %s is not an integer "
                           "in [0, %llu) (%u qubits)", (unsigned long long)(s0 + i), v,
                           (unsigned long long)N, qubits);
        }
    }
    return QM_OK;
}

/* Read samples [s0, s0 + count) (F values each) as doubles into v, checking every value; basis:
 * the indices also into idx (exactly, from read_int, for an integer input). */
static qm_code read_samples(const qm_amp_input *in, qm_encoding enc, unsigned qubits, uint64_t F,
                            uint64_t s0, uint64_t count, double *v, uint64_t *idx, qm_status *st)
{
    if (enc == QM_ENCODING_BASIS && in->read_int)
        return read_indices(in, qubits, s0, count, idx, st);
    const uint64_t n = count * F;
    qm_code rc;
    if (in->dtype == QM_DTYPE_FLOAT64) {
        rc = qm_input_read(in, s0 * F, n, v, st);
    } else {
        /* float32: read into the back half of v's bytes, widen from the front (no overlap: each
         * double lands at or before the float it comes from has been read) */
        float *f = (float *)(void *)(v + n) - n;
        rc = qm_input_read(in, s0 * F, n, f, st);
        for (uint64_t i = 0; rc == QM_OK && i < n; ++i)
            v[i] = (double)f[i];
    }
    if (rc != QM_OK)
        return rc;
    const double N = ldexp(1.0, (int)qubits);
    for (uint64_t i = 0; i < n; ++i) {
        const uint64_t s = in->first_sample + s0 + i / F, k = i % F;
        if (!isfinite(v[i]))
            return qm_fail(st, QM_E_INPUT, "encode: sample %llu, value %llu is %s; the %s encoding "
                           "needs finite values", (unsigned long long)s, (unsigned long long)k,
                           isnan(v[i]) ? "NaN" : v[i] > 0 ? "+Inf" : "-Inf",
                           qm_encoding_name(enc));
        if (enc == QM_ENCODING_BASIS && !(v[i] >= 0 && v[i] < N && v[i] == floor(v[i])))
            return qm_fail(st, QM_E_INPUT, "encode: sample %llu: basis index %.17g is not an "
                           "integer in [0, %.0f) (%u qubits)", (unsigned long long)s, v[i], N,
                           qubits);
        if (enc == QM_ENCODING_BASIS)
            idx[i] = (uint64_t)v[i];
    }
    return QM_OK;
}

/* The factor table of one sample: per qubit q, (re, im) of f_q(0) then of f_q(1). x: its values;
 * j: its basis index. */
static void sample_factors(qm_encoding enc, unsigned qubits, const double *x, uint64_t j, double *f)
{
    for (unsigned q = 0; q < qubits; ++q) {
        double *g = f + 4 * q;
        switch (enc) {
        case QM_ENCODING_ANGLE:
            g[0] = cos(x[q]), g[1] = 0.0, g[2] = sin(x[q]), g[3] = 0.0;
            break;
        case QM_ENCODING_PHASE:
            g[0] = 1.0, g[1] = 0.0, g[2] = cos(x[q]), g[3] = sin(x[q]);
            break;
        case QM_ENCODING_IQP_Z: {
            /* (1 + (-1)^b e^(i d)) / 2 = cos(d/2) e^(i d/2) for b = 0, -i sin(d/2) e^(i d/2) for
             * b = 1: no cancellation near d = pi (1 + cos d would lose it) */
            const double c = cos(0.5 * x[q]), s = sin(0.5 * x[q]);
            g[0] = c * c, g[1] = c * s, g[2] = s * s, g[3] = -(s * c);
            break;
        }
        default: { /* basis */
            const bool one = (j >> q) & 1u;
            g[0] = one ? 0.0 : 1.0, g[1] = 0.0, g[2] = one ? 1.0 : 0.0, g[3] = 0.0;
            break;
        }
        }
    }
}

/* 2^(-n/2) for phase (one rounding for odd n), 1 otherwise. */
static double product_scale(qm_encoding enc, unsigned qubits)
{
    if (enc != QM_ENCODING_PHASE)
        return 1.0;
    const double half = ldexp(1.0, -(int)(qubits / 2));
    return qubits % 2 ? half * 0.70710678118654752440 : half;
}

/* One shard: read its samples, build their factors, launch the op on its own stream. The
 * table's device buffer is returned in *table (freed by the caller after the stream drained);
 * *read_failed tells a failure in reading or checking its samples (whose message needs no shard
 * in front: it names the sample, or the file's line and column). */
static qm_code encode_shard(qm_hal *hal, qm_encoding enc, unsigned qubits, unsigned local_bits,
                            qm_dtype dt, const qm_amp_input *in, qm_state_shard *sh,
                            qm_hal_stream *s, qm_hal_buf **table, bool *read_failed,
                            qm_status *st)
{
    const uint64_t F = in->n;
    const uint64_t s0 = sh->start >> qubits, s1 = (sh->end - 1) >> qubits, count = s1 - s0 + 1;
    const bool iqp = qm_encoding_is_iqp(enc); /* iqp-z is a product state (sample_factors) */
    const uint64_t per = iqp ? F : 4 * (uint64_t)qubits;
    if (count > SIZE_MAX / sizeof(double) / (per > F ? per : F))
        return qm_fail(st, QM_E_NOMEM, "encode: factor table of %llu samples overflows",
                       (unsigned long long)count);
    const bool basis = enc == QM_ENCODING_BASIS;
    double *x = malloc((size_t)(count * F) * sizeof *x);
    uint64_t *idx = basis ? malloc((size_t)count * sizeof *idx) : NULL;
    double *f = NULL;
    qm_code rc = x && (idx || !basis)
                   ? QM_OK
                   : qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu samples",
                             (unsigned long long)count);
    if (rc == QM_OK)
        *read_failed = (rc = read_samples(in, enc, qubits, F, s0, count, x, idx, st)) != QM_OK;
    if (rc == QM_OK &&
        (rc = qm_hal_host_alloc(hal, (size_t)(count * per) * sizeof *f, (void **)&f, st)) == QM_OK) {
        if (iqp) /* the coefficients are the values */
            memcpy(f, x, (size_t)(count * F) * sizeof *f);
        else
            for (uint64_t k = 0; k < count; ++k)
                sample_factors(enc, qubits, x + k * F, basis ? idx[k] : 0, f + k * per);
        rc = qm_hal_buf_alloc(hal, sh->device, count * per * sizeof *f, table, st);
    }
    /* the copy is synchronous (the host table is freed below); the kernel is enqueued */
    if (rc == QM_OK)
        rc = qm_hal_copy_h2d(hal, *table, 0, f, count * per * sizeof *f, NULL, st);
    if (rc == QM_OK && iqp) {
        const uint64_t n = sh->end - sh->start;
        const qm_hal_iqp_phase_args a = {.state = sh->buf, .state_dtype = dt, .off = 0, .n = n,
                                         .g0 = sh->start, .qubits = qubits,
                                         .n_coeffs = (unsigned)F, .first_state = s0,
                                         .n_states = count, .table = *table, .table_off = 0,
                                         .scale = ldexp(1.0, -(int)qubits)};
        const qm_hal_wht_args w = {.state = sh->buf, .state_dtype = dt, .off = 0, .n = n, .b0 = 0,
                                   .b1 = local_bits};
        /* one op where the backend fuses the phase and the local stages, else the two */
        if (qm_hal_supports_op(hal, QM_HAL_OP_IQP)) {
            const qm_hal_iqp_args fused = {.phase = a, .b1 = local_bits};
            rc = qm_hal_iqp(hal, &fused, s, st);
        } else if ((rc = qm_hal_iqp_phase(hal, &a, s, st)) == QM_OK && local_bits > 0) {
            rc = qm_hal_wht(hal, &w, s, st);
        }
    } else if (rc == QM_OK) {
        const qm_hal_product_args a = {.state = sh->buf, .state_dtype = dt, .off = 0,
                                       .n = sh->end - sh->start, .g0 = sh->start,
                                       .qubits = qubits, .first_state = s0, .n_states = count,
                                       .table = *table, .table_off = 0,
                                       .scale = product_scale(enc, qubits)};
        rc = qm_hal_product(hal, &a, s, st);
    }
    qm_hal_host_free(hal, f);
    free(idx);
    free(x);
    return rc;
}

qm_code qm_materialize_featuremap(qm_hal *hal, qm_encoding enc, unsigned qubits, qm_dtype out_dtype,
                                  const qm_shard_spec *shards, int n_shards,
                                  const qm_amp_input *in, const qm_materialize_opts *opts,
                                  qm_state **out, qm_status *ust)
{
    qm_status lst, *st = &lst;
    qm_status_clear(st);
    qm_code rc = QM_OK;
    qm_state *state = NULL;
    qm_hal_stream **streams = NULL;
    qm_hal_buf **tables = NULL;
    qm_comm *comm = opts ? opts->comm : NULL;
    bool replicated = false;
    if (out)
        *out = NULL;
    if (!hal || !out || !in) {
        rc = qm_fail(st, QM_E_ARG, "encode: hal, input and out must not be NULL");
        goto early;
    }
    if (!qm_encoding_is_product(enc) && !qm_encoding_is_iqp(enc)) {
        rc = qm_fail(st, QM_E_UNSUPPORTED, "encode: the %s encoding is not a feature map (angle, "
                     "basis, phase, iqp-z and iqp are)",
                     qm_encoding_name(enc) ? qm_encoding_name(enc) : "unknown");
        goto early;
    }
    if ((rc = qm_materialize_check_input(qubits, out_dtype, in, st)) != QM_OK)
        goto early;
    const uint64_t F = qm_encoding_features(enc, qubits);
    if (in->n != F) {
        rc = qm_fail(st, QM_E_INPUT, "encode: the %s encoding of %u qubits takes %llu value%s per "
                     "sample, got %llu", qm_encoding_name(enc), qubits, (unsigned long long)F,
                     F == 1 ? "" : "s", (unsigned long long)in->n);
        goto early;
    }
    const uint64_t B = in->batch ? in->batch : 1;
    const bool part = comm && qm_comm_size(comm) > 1;
    if ((rc = qm_materialize_check_layout(B << qubits, shards, n_shards, qm_hal_device_count(hal),
                                          part, &replicated, st)) != QM_OK)
        goto early;
    unsigned local_bits = qubits;
    if (qm_encoding_is_iqp(enc) &&
        (rc = qm_iqp_check_layout(enc, qubits, B, shards, n_shards, comm, &local_bits, st)) != QM_OK)
        goto early;

    double t0 = seconds_now();
    streams = calloc((size_t)n_shards, sizeof *streams);
    tables = calloc((size_t)n_shards, sizeof *tables);
    if (!streams || !tables)
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n_shards);
    if (rc == QM_OK &&
        (rc = qm_state_create_empty(hal, qubits, out_dtype, n_shards, &state, st)) == QM_OK)
        state->batch = B;
    for (int i = 0; rc == QM_OK && i < n_shards; ++i) {
        qm_state_shard *sh = &state->shards[i];
        const qm_shard_spec *s = &shards[i];
        bool read_failed = false;
        *sh = (qm_state_shard){.rank = s->rank, .device = s->device, .start = s->start,
                               .end = s->end};
        rc = qm_hal_buf_alloc(hal, s->device, (s->end - s->start) * qm_dtype_size(out_dtype),
                              &sh->buf, st);
        if (rc == QM_OK)
            rc = qm_hal_stream_create(hal, s->device, &streams[i], st);
        if (rc == QM_OK)
            rc = encode_shard(hal, enc, qubits, local_bits, out_dtype, in, sh, streams[i],
                              &tables[i], &read_failed, st);
        if (rc != QM_OK && !read_failed && st->msg[0] && strncmp(st->msg, "encode: ", 8) != 0)
            qm_status_prefix(st, "encode: shard %d", i);
    }
    for (int i = 0; streams && i < n_shards; ++i) {
        qm_materialize_drain(hal, streams[i], &rc, st);
        qm_hal_buf_free(hal, tables ? tables[i] : NULL);
        if (rc == QM_OK && opts && opts->progress)
            opts->progress(opts->progress_ctx, (uint64_t)i + 1, (uint64_t)n_shards);
    }
    rc = qm_comm_verdict(comm, rc, st); /* every rank returns the same verdict */
    if (rc == QM_OK && local_bits < qubits) /* IQP: the stages across shards */
        rc = qm_comm_verdict(comm, qm_iqp_exchange(hal, state, local_bits, comm, st), st);
    const double t1 = seconds_now();
    if (rc == QM_OK && opts && opts->times)
        *opts->times = (qm_materialize_times){.ingest = 0, .local_norm = 0, .norm_allreduce = 0,
                                              .encode = t1 - t0};
    if (rc == QM_OK)
        state->norm = B == 1 ? 1.0 : 0.0;
    free(streams);
    free(tables);
    if (rc != QM_OK) {
        qm_state_destroy(state);
        state = NULL;
    }
    *out = state;
    if (ust)
        *ust = lst;
    return rc;
early:
    if (ust)
        *ust = lst;
    return rc;
}
