/* state.c — the state handle: shard queries, host reads by global range, destruction (a state
 * whose buffers came from a context's pool gives them back there: reuse.h).
 *
 * In: a state built by materialize.c. Out: shard descriptions and amplitudes copied to the host.
 * Must not: change amplitudes, or read past a shard (the HAL wrappers check every copy's bounds).
 */
#include "state_internal.h"
#include "reuse.h"
#include "status_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Live states, so that a view can tell whether its state still exists without touching freed
 * memory. A small open list under a mutex: states are few and long-lived. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t live_next = 1;
static uint64_t *live;
static size_t live_n, live_cap;

static uint64_t live_add(void)
{
    pthread_mutex_lock(&live_mu);
    uint64_t serial = 0;
    if (live_n == live_cap) {
        size_t cap = live_cap ? 2 * live_cap : 64;
        uint64_t *g = realloc(live, cap * sizeof *g);
        if (g) {
            live = g;
            live_cap = cap;
        }
    }
    if (live_n < live_cap) {
        serial = live_next++;
        live[live_n++] = serial;
    }
    pthread_mutex_unlock(&live_mu);
    return serial;
}

static void live_remove(uint64_t serial)
{
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < live_n; ++i)
        if (live[i] == serial) {
            live[i] = live[--live_n];
            break;
        }
    pthread_mutex_unlock(&live_mu);
}

int qm_shard_view_valid(const qm_shard_view *view)
{
    if (!view || view->state_serial == 0)
        return 0;
    int found = 0;
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < live_n && !found; ++i)
        found = live[i] == view->state_serial;
    pthread_mutex_unlock(&live_mu);
    return found;
}

qm_code qm_state_create_empty(qm_hal *hal, unsigned qubits, qm_dtype dtype, int n_shards,
                              qm_state **out, qm_status *st)
{
    *out = NULL;
    qm_state *s = calloc(1, sizeof *s);
    qm_state_shard *sh = calloc((size_t)(n_shards > 0 ? n_shards : 1), sizeof *sh);
    if (!s || !sh) {
        free(s);
        free(sh);
        return qm_fail(st, QM_E_NOMEM, "state: out of host memory for %d shards", n_shards);
    }
    atomic_init(&s->refs, 1);
    s->serial = live_add(); /* 0 when the registry is out of memory: views then report invalid */
    s->hal = hal;
    s->qubits = qubits;
    s->dtype = dtype;
    s->n_amps = (uint64_t)1 << qubits;
    s->batch = 1;
    s->n_shards = n_shards;
    s->shards = sh;
    *out = s;
    return QM_OK;
}

qm_state *qm_state_retain(const qm_state *state)
{
    if (state) /* only the reference count is written */
        atomic_fetch_add(&((qm_state *)state)->refs, 1);
    return (qm_state *)state;
}

void qm_state_destroy(qm_state *state)
{
    if (!state || atomic_fetch_sub(&state->refs, 1) != 1)
        return;
    live_remove(state->serial);
    for (int i = 0; i < state->n_shards; ++i) {
        if (state->reuse)
            qm_reuse_state_put(state->reuse, state->shards[i].buf);
        else
            qm_hal_buf_free(state->hal, state->shards[i].buf);
    }
    void (*release)(void *) = state->owner_release;
    void *owner = state->owner;
    free(state->shards);
    free(state);
    if (release)
        release(owner); /* last: may destroy the backend the buffers came from */
}

int qm_state_shard_count(const qm_state *state) { return state ? state->n_shards : 0; }
unsigned qm_state_qubits(const qm_state *state) { return state ? state->qubits : 0; }
qm_dtype qm_state_dtype(const qm_state *state) { return state ? state->dtype : QM_DTYPE_COMPLEX128; }

qm_code qm_state_shard_query(const qm_state *state, int shard, qm_shard_info *out, qm_status *st)
{
    if (!state || !out)
        return qm_fail(st, QM_E_ARG, "state: state and out must not be NULL");
    if (shard < 0 || shard >= state->n_shards)
        return qm_fail(st, QM_E_ARG, "state: shard %d is out of range (the state has %d shards)",
                       shard, state->n_shards);
    const qm_state_shard *s = &state->shards[shard];
    qm_hal_device_info info;
    qm_code rc = qm_hal_device_info_query(state->hal, s->device, &info, st);
    if (rc != QM_OK)
        return rc;
    out->shard = shard;
    out->rank = s->rank;
    out->device = s->device;
    snprintf(out->device_id, sizeof out->device_id, "%s", info.id);
    out->start = s->start;
    out->end = s->end;
    return QM_OK;
}

qm_code qm_state_read(const qm_state *state, uint64_t start, uint64_t count, qm_dtype dtype,
                      void *dst, qm_status *st)
{
    if (!state || (!dst && count > 0))
        return qm_fail(st, QM_E_ARG, "state read: state and destination must not be NULL");
    if (dtype != state->dtype)
        return qm_fail(st, QM_E_DTYPE, "state read: the state is %s but %s was requested",
                       qm_dtype_name(state->dtype),
                       qm_dtype_name(dtype) ? qm_dtype_name(dtype) : "an unknown dtype");
    uint64_t total = state->n_amps * state->batch;
    if (start > total || count > total - start)
        return qm_fail(st, QM_E_BOUNDS, "state read: range [%llu, %llu) is outside the state's "
                       "%llu amplitudes", (unsigned long long)start,
                       (unsigned long long)(start + count), (unsigned long long)total);
    const uint64_t es = qm_dtype_size(dtype);
    uint64_t pos = start, end = start + count;
    for (int i = 0; i < state->n_shards && pos < end; ++i) {
        const qm_state_shard *s = &state->shards[i];
        if (s->end <= pos || s->start >= end)
            continue;
        uint64_t lo = pos, hi = s->end < end ? s->end : end;
        qm_code rc = qm_hal_copy_d2h(state->hal, (char *)dst + (lo - start) * es, s->buf,
                                     (lo - s->start) * es, (hi - lo) * es, NULL, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "state read of shard %d", i);
        pos = hi;
    }
    if (pos != end)
        return qm_fail(st, QM_E_INTERNAL, "state read: shards do not cover [%llu, %llu)",
                       (unsigned long long)pos, (unsigned long long)end);
    return QM_OK;
}

qm_code qm_state_traffic(const qm_state *state, qm_traffic *out, qm_status *st)
{
    if (!state || !out)
        return qm_fail(st, QM_E_ARG, "state_traffic: state and out must not be NULL");
    memset(out, 0, sizeof *out);
    for (int d = 0; d < qm_hal_device_count(state->hal); ++d) {
        qm_hal_usage u;
        qm_code rc = qm_hal_usage_query(state->hal, d, &u, st);
        if (rc != QM_OK)
            return rc;
        out->h2d_bytes += u.h2d_bytes;
        out->d2h_bytes += u.d2h_bytes;
        out->d2d_bytes += u.d2d_bytes;
        out->peer_bytes += u.peer_out_bytes;
    }
    return QM_OK;
}

qm_code qm_state_shard_view(const qm_state *state, int shard, qm_shard_view *out, qm_status *st)
{
    qm_shard_info info;
    qm_code rc = qm_state_shard_query(state, shard, &info, st);
    if (rc != QM_OK)
        return rc;
    const qm_state_shard *s = &state->shards[shard];
    void *data = qm_hal_buf_raw(s->buf);
    if (!data)
        return qm_fail(st, QM_E_UNSUPPORTED, "state: shard %d on %s has no data (phantom memory)",
                       shard, info.device_id);
    memset(out, 0, sizeof *out);
    out->shard = shard;
    out->rank = s->rank;
    out->device = s->device;
    memcpy(out->device_id, info.device_id, sizeof out->device_id);
    out->start = s->start;
    out->end = s->end;
    out->length = s->end - s->start;
    out->dtype = state->dtype;
    out->data = data;
    out->host_accessible = qm_hal_buf_host_ptr(s->buf) != NULL;
    /* where the memory is comes from the device (a fault shim over CUDA is still CUDA memory) */
    qm_hal_device_info dev;
    if ((rc = qm_hal_device_info_query(state->hal, s->device, &dev, st)) != QM_OK)
        return rc;
    out->device_kind = dev.memory == QM_HAL_MEMORY_CUDA ? 2 : 1;
    out->cuda_device = dev.memory == QM_HAL_MEMORY_CUDA ? dev.cuda_ordinal : -1;
    out->state_serial = state->serial;
    return QM_OK;
}

qm_code qm_state_gather(const qm_state *state, int device, qm_state **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!state || !out)
        return qm_fail(st, QM_E_ARG, "gather: state and out must not be NULL");
    if (device < 0 || device >= qm_hal_device_count(state->hal))
        return qm_fail(st, QM_E_ARG, "gather: device %d is out of range (the mesh has %d devices)",
                       device, qm_hal_device_count(state->hal));
    const uint64_t total = state->n_amps * state->batch, es = qm_dtype_size(state->dtype);
    qm_state *g = NULL;
    qm_code rc = qm_state_create_empty(state->hal, state->qubits, state->dtype, 1, &g, st);
    if (rc != QM_OK)
        return rc;
    g->batch = state->batch;
    g->norm = state->norm;
    if (state->owner_retain) { /* the gathered state keeps the backend alive too */
        state->owner_retain(state->owner);
        g->owner_retain = state->owner_retain;
        g->owner_release = state->owner_release;
        g->owner = state->owner;
    }
    g->shards[0] = (qm_state_shard){.rank = 0, .device = device, .start = 0, .end = total};
    if ((rc = qm_hal_buf_alloc(state->hal, device, total * es, &g->shards[0].buf, st)) != QM_OK) {
        qm_status_prefix(st, "gather");
        goto fail;
    }
    uint64_t pos = 0;
    for (int i = 0; i < state->n_shards && pos < total; ++i) {
        const qm_state_shard *s = &state->shards[i];
        if (s->end <= pos)
            continue; /* replicated copies after the first */
        rc = qm_hal_copy_d2d(state->hal, g->shards[0].buf, pos * es, s->buf, (pos - s->start) * es,
                             (s->end - pos) * es, NULL, st);
        if (rc != QM_OK) {
            qm_status_prefix(st, "gather of shard %d", i);
            goto fail;
        }
        pos = s->end;
    }
    *out = g;
    return QM_OK;
fail:
    qm_state_destroy(g);
    return rc;
}
