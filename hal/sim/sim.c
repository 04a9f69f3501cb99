/* sim.c — the simulated backend (see sim.h). Kernels are the OpenMP CPU kernels in kernels/.
 *
 * In: a device description (and QM_SIM_POISON, read once by qm_hal_sim_create when the description
 * leaves poisoning to the environment). Out: a qm_hal whose devices are host memory (materialized)
 * or counters (phantom). New buffers are not written unless poisoned: qm_hal_big_alloc maps large
 * blocks lazily, on huge pages where the kernel allows (one fault per 2 MiB), so a state's pages
 * are first touched by the kernel threads that write it.
 * Must not: be called except through the hal.c wrappers (they check every range first).
 * Thread-safety: devices are independent; link counters are per link and per direction.
 */
#include "sim.h"
#include "cpu_kernels.h"
#include "hal_impl.h"
#include "status_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_link {
    int a, b;            /* a < b */
    uint64_t bytes[2];   /* [0]: a -> b, [1]: b -> a */
} sim_link;

/* Freed blocks kept for reuse (like a device caching allocator), so that repeated encodes do not
 * pay the host's page faults again. Only whole blocks of the same size are reused. */
#define SIM_CACHE_BLOCKS 16
typedef struct sim_block {
    void *ptr;
    size_t bytes;
} sim_block;

typedef struct sim_ctx {
    int n_dev;
    bool poison;         /* 0xFF on alloc and free (QM_SIM_POISON_ON, or QM_SIM_POISON=1) */
    sim_block cache[SIM_CACHE_BLOCKS];
    int n_cache;
    qm_hal_device_info *info;
    int n_links;
    sim_link *links;     /* sorted by (a, b) */
    qm_sim_memory memory;
} sim_ctx;

#define SIM_POISON 0xFF

static int sim_link_cmp(const void *x, const void *y)
{
    const sim_link *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

static sim_link *sim_link_find(const sim_ctx *c, int a, int b)
{
    sim_link key = {.a = a < b ? a : b, .b = a < b ? b : a};
    return bsearch(&key, c->links, (size_t)c->n_links, sizeof key, sim_link_cmp);
}

static int sim_device_count(void *ctx) { return ((sim_ctx *)ctx)->n_dev; }

static qm_code sim_device_info(void *ctx, int dev, qm_hal_device_info *out, qm_status *st)
{
    (void)st;
    *out = ((sim_ctx *)ctx)->info[dev];
    return QM_OK;
}

static bool sim_peer(void *ctx, int a, int b) { return sim_link_find(ctx, a, b) != NULL; }

static qm_code sim_buf_alloc(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                             qm_status *st)
{
    sim_ctx *c = ctx;
    (void)dev;
    *ptr = *host_ptr = NULL;
    if (c->memory == QM_SIM_PHANTOM)
        return QM_OK;
    if (bytes > SIZE_MAX - 63)
        return qm_fail(st, QM_E_NOMEM, "%llu bytes cannot be held in host memory",
                       (unsigned long long)bytes);
    const size_t size = (size_t)((bytes + 63) & ~(uint64_t)63);
    void *p = NULL;
    for (int i = 0; i < c->n_cache; ++i) {
        if (c->cache[i].bytes == size) {
            p = c->cache[i].ptr;
            c->cache[i] = c->cache[--c->n_cache];
            break;
        }
    }
    if (!p)
        p = qm_hal_big_alloc(size);
    if (!p)
        return qm_fail(st, QM_E_NOMEM, "out of host memory for %llu simulated device bytes",
                       (unsigned long long)bytes);
    if (c->poison)
        memset(p, SIM_POISON, (size_t)bytes);
    *ptr = *host_ptr = p;
    return QM_OK;
}

static void sim_buf_free(void *ctx, int dev, void *ptr, uint64_t bytes)
{
    sim_ctx *c = ctx;
    (void)dev;
    if (!ptr)
        return;
    if (c->poison)
        memset(ptr, SIM_POISON, (size_t)bytes);
    const size_t size = (size_t)((bytes + 63) & ~(uint64_t)63);
    if (c->n_cache == SIM_CACHE_BLOCKS) { /* evict the oldest */
        free(c->cache[0].ptr);
        memmove(c->cache, c->cache + 1, (SIM_CACHE_BLOCKS - 1) * sizeof *c->cache);
        c->n_cache--;
    }
    c->cache[c->n_cache++] = (sim_block){.ptr = ptr, .bytes = size};
}

static qm_code phantom_refusal(qm_status *st, const char *what)
{
    return qm_fail(st, QM_E_UNSUPPORTED, "%s: phantom devices hold no data (capacity accounting "
                   "only); use materialized memory to move or compute bytes", what);
}

static qm_code sim_copy(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st)
{
    (void)dev;
    (void)s;
    if (((sim_ctx *)ctx)->memory == QM_SIM_PHANTOM)
        return phantom_refusal(st, "copy");
    memmove(dst, src, (size_t)bytes);
    return QM_OK;
}

static qm_code sim_copy_peer(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                             uint64_t bytes, void *s, qm_status *st)
{
    sim_ctx *c = ctx;
    (void)s;
    sim_link *l = sim_link_find(c, src_dev, dst_dev);
    if (!l)
        return qm_fail(st, QM_E_BACKEND, "no path between %s and %s", c->info[src_dev].id,
                       c->info[dst_dev].id);
    if (c->memory == QM_SIM_PHANTOM)
        return phantom_refusal(st, "peer copy");
    memmove(dst, src, (size_t)bytes);
    l->bytes[src_dev == l->a ? 0 : 1] += bytes;
    return QM_OK;
}

/* The kernels' element type of a dtype (every dtype has one: a new qm_dtype fails -Wswitch here). */
static qmk_elem elem_of(qm_dtype dt)
{
    switch (dt) {
    case QM_DTYPE_FLOAT32: return QMK_F32;
    case QM_DTYPE_FLOAT64: return QMK_F64;
    case QM_DTYPE_COMPLEX64: return QMK_C64;
    case QM_DTYPE_COMPLEX128: return QMK_C128;
    }
    return QMK_F64; /* unreachable: the wrappers checked the dtype */
}

/* Every op of the amplitude family, the product states and IQP; an op of a later encoding is added
 * here when its case is. */
static bool sim_supports_op(void *ctx, qm_hal_op op)
{
    (void)ctx;
    return qm_hal_op_is_amplitude(op) || op == QM_HAL_OP_PRODUCT || op == QM_HAL_OP_IQP_PHASE ||
           op == QM_HAL_OP_WHT || op == QM_HAL_OP_STATE_SUMSQ || op == QM_HAL_OP_IQP ||
           op == QM_HAL_OP_TREE_COMBINE;
}

/* Every op runs the CPU kernel at once (the simulator is synchronous: streams are ignored). Device
 * memory is host memory, so the sums of sumsq_dev are written where they go. */
static qm_code sim_launch(void *ctx, int dev, qm_hal_op op, const void *params,
                          void *const bufs[QM_HAL_OP_BUFS], void *s, qm_status *st)
{
    (void)dev;
    (void)s;
    if (((sim_ctx *)ctx)->memory == QM_SIM_PHANTOM)
        return phantom_refusal(st, qm_hal_op_name(op));
    void *state = bufs[QM_HAL_OP_BUF_STATE], *out = bufs[QM_HAL_OP_BUF_OUT];
    const void *in = bufs[QM_HAL_OP_BUF_INPUT];
    switch (op) {
    case QM_HAL_OP_AMP_STASH: {
        const qm_hal_stash_args *a = params;
        qm_cpu_stash(state, elem_of(a->out_dtype), a->slot_g0, a->period, a->period_valid, in,
                     elem_of(a->in_dtype), a->in_off, a->in_first, a->n);
        return QM_OK;
    }
    case QM_HAL_OP_AMP_SUMSQ:
    case QM_HAL_OP_AMP_SUMSQ_DEV: {
        const qm_hal_sumsq_args *a = params;
        qm_cpu_sumsq_blocks(state, elem_of(a->state_dtype), a->off, a->g0, a->period,
                            a->period_valid, a->log2_block, a->n_blocks, a->scale,
                            op == QM_HAL_OP_AMP_SUMSQ ? a->out_sums : out, in,
                            elem_of(a->in_dtype), a->in_first);
        return QM_OK;
    }
    case QM_HAL_OP_AMP_SCAN: {
        const qm_hal_scan_args *a = params;
        qm_cpu_scan(state, elem_of(a->state_dtype), a->off, a->n, &a->out->max_abs,
                    &a->out->first_nonfinite);
        return QM_OK;
    }
    case QM_HAL_OP_AMP_SCALE: {
        const qm_hal_amp_scale_args *a = params;
        qm_cpu_amp_scale(state, elem_of(a->state_dtype), a->off, a->n, a->g0, a->period,
                         a->period_valid, a->first_state, a->coeffs, a->scales, in,
                         elem_of(a->in_dtype), a->in_first);
        return QM_OK;
    }
    case QM_HAL_OP_AMP_BATCH: {
        const qm_hal_amp_batch_args *a = params;
        qm_cpu_amp_batch(state, elem_of(a->state_dtype), a->off, a->period, a->period_valid,
                         a->n_states, in, elem_of(a->in_dtype), a->in_off, out, a->sums_off);
        return QM_OK;
    }
    case QM_HAL_OP_PRODUCT: {
        const qm_hal_product_args *a = params;
        qm_cpu_product(state, elem_of(a->state_dtype), a->off, a->n, a->g0, a->qubits,
                       a->first_state, in, a->scale);
        return QM_OK;
    }
    case QM_HAL_OP_IQP_PHASE: {
        const qm_hal_iqp_phase_args *a = params;
        qm_cpu_iqp_phase(state, elem_of(a->state_dtype), a->off, a->n, a->g0, a->qubits,
                         a->n_coeffs, a->first_state, in, a->scale);
        return QM_OK;
    }
    case QM_HAL_OP_WHT: {
        const qm_hal_wht_args *a = params;
        qm_cpu_wht(state, elem_of(a->state_dtype), a->off, a->n, a->b0, a->b1, in, a->high);
        return QM_OK;
    }
    case QM_HAL_OP_STATE_SUMSQ: {
        const qm_hal_state_sumsq_args *a = params;
        qm_cpu_state_sumsq((const char *)state + a->off * qm_dtype_size(a->state_dtype),
                           elem_of(a->state_dtype), a->n, a->g0, a->log2_block, out);
        return QM_OK;
    }
    case QM_HAL_OP_IQP: { /* the two kernels one after the other: the fused op's bits */
        const qm_hal_iqp_args *a = params;
        const qm_hal_iqp_phase_args *p = &a->phase;
        qm_cpu_iqp_phase(state, elem_of(p->state_dtype), p->off, p->n, p->g0, p->qubits,
                         p->n_coeffs, p->first_state, in, p->scale);
        if (a->b1 > 0)
            qm_cpu_wht(state, elem_of(p->state_dtype), p->off, p->n, 0, a->b1, NULL, 0);
        return QM_OK;
    }
    case QM_HAL_OP_TREE_COMBINE: {
        const qm_hal_tree_combine_args *a = params;
        qm_cpu_tree_combine((const double *)in + a->in_off, a->n_groups, a->log2_group, out);
        return QM_OK;
    }
    case QM_HAL_OP_COUNT_:
        break;
    }
    return qm_fail(st, QM_E_UNSUPPORTED, "op %d is not a simulator kernel", (int)op);
}

/* Simulated device memory is host memory: kernels read the caller's buffer where it is. */
static qm_code sim_wrap_host(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                             qm_status *st)
{
    (void)dev;
    (void)bytes;
    if (((sim_ctx *)ctx)->memory == QM_SIM_PHANTOM)
        return phantom_refusal(st, "wrap_host");
    *out = (void *)(uintptr_t)ptr;
    return QM_OK;
}

/* ... and so is memory "of the device" handed in by a caller. */
static qm_code sim_wrap_device(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                               qm_status *st)
{
    if (((sim_ctx *)ctx)->memory == QM_SIM_PHANTOM)
        return phantom_refusal(st, "wrap_device");
    return sim_wrap_host(ctx, dev, ptr, bytes, out, st);
}

static void sim_destroy(void *ctx)
{
    sim_ctx *c = ctx;
    if (!c)
        return;
    for (int i = 0; i < c->n_cache; ++i)
        free(c->cache[i].ptr);
    free(c->info);
    free(c->links);
    free(c);
}

static const qm_hal_ops sim_ops = {
    .kind = QM_HAL_SIM,
    .abi = 6, /* the HAL ABI this table was written against (hal_impl.h) */
    .destroy = sim_destroy,
    .device = {
        .count = sim_device_count,
        .info = sim_device_info,
        .peer = sim_peer,
        .buf_alloc = sim_buf_alloc,
        .buf_free = sim_buf_free,
        .wrap_host = sim_wrap_host,
        .wrap_device = sim_wrap_device,
    },
    .stream = {
        .copy_h2d = sim_copy,
        .copy_d2h = sim_copy,
        .copy_d2d = sim_copy,
        .copy_peer = sim_copy_peer,
    },
    .kernel = {
        .supports_op = sim_supports_op,
        .launch = sim_launch,
    },
};

static int info_id_cmp(const void *x, const void *y)
{
    return strcmp((*(const qm_hal_device_info *const *)x)->id,
                  (*(const qm_hal_device_info *const *)y)->id);
}

qm_code qm_hal_sim_create(const qm_sim_desc *desc, qm_hal **out, qm_status *st)
{
    qm_code rc = QM_OK;
    const qm_hal_device_info **order = NULL;
    if (out)
        *out = NULL;
    if (!desc || !out)
        return qm_fail(st, QM_E_ARG, "sim: description and out must not be NULL");
    if (desc->n_devices < 1 || !desc->devices)
        return qm_fail(st, QM_E_ARG, "sim: a mesh needs at least 1 device (got %d)",
                       desc->n_devices);
    if (desc->n_peers < 0 || (desc->n_peers > 0 && !desc->peers))
        return qm_fail(st, QM_E_ARG, "sim: %d peers given without a peer list", desc->n_peers);
    if (desc->memory != QM_SIM_MATERIALIZED && desc->memory != QM_SIM_PHANTOM)
        return qm_fail(st, QM_E_ARG, "sim: unknown memory mode %d", (int)desc->memory);
    bool poison = desc->poison == QM_SIM_POISON_ON;
    if (desc->poison == QM_SIM_POISON_ENV) { /* the debug switch, read here once */
        const char *env = getenv("QM_SIM_POISON");
        if (env && env[0] && strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
            return qm_fail(st, QM_E_ARG, "sim: QM_SIM_POISON must be 0 or 1 (got '%.32s')", env);
        poison = env && strcmp(env, "1") == 0;
    } else if (desc->poison != QM_SIM_POISON_ON && desc->poison != QM_SIM_POISON_OFF) {
        return qm_fail(st, QM_E_ARG, "sim: unknown poison mode %d", (int)desc->poison);
    }
    sim_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return qm_fail(st, QM_E_NOMEM, "sim: out of host memory");
    c->n_dev = desc->n_devices;
    c->memory = desc->memory;
    c->poison = poison;
    c->info = calloc((size_t)c->n_dev, sizeof *c->info);
    c->links = calloc((size_t)desc->n_peers + 1, sizeof *c->links);
    if (!c->info || !c->links) {
        rc = qm_fail(st, QM_E_NOMEM, "sim: out of host memory for %d devices", c->n_dev);
        goto fail;
    }
    for (int d = 0; d < c->n_dev; ++d) {
        const qm_sim_device_desc *dd = &desc->devices[d];
        qm_hal_device_info *in = &c->info[d];
        if (!dd->id || !dd->id[0] || strlen(dd->id) >= sizeof in->id) {
            rc = qm_fail(st, QM_E_ARG, "sim: device %d needs an id of 1 to %zu characters", d,
                         sizeof in->id - 1);
            goto fail;
        }
        if (dd->memory_bytes == 0 || dd->reserve_bytes >= dd->memory_bytes) {
            char m[32], r[32];
            rc = qm_fail(st, QM_E_RESERVE, "sim: device %s: reserve %s is not below memory %s",
                         dd->id, qm_format_bytes(dd->reserve_bytes, r, sizeof r),
                         qm_format_bytes(dd->memory_bytes, m, sizeof m));
            goto fail;
        }
        snprintf(in->id, sizeof in->id, "%s", dd->id);
        snprintf(in->name, sizeof in->name, "%s", dd->name ? dd->name : "sim");
        in->memory_bytes = dd->memory_bytes;
        in->usable_bytes = dd->memory_bytes - dd->reserve_bytes;
        in->hbm_bw_bytes_per_s = dd->hbm_bw_bytes_per_s;
        in->host_bw_bytes_per_s = dd->host_bw_bytes_per_s;
        in->numa = dd->numa;
    }
    order = malloc((size_t)c->n_dev * sizeof *order);
    if (!order) {
        rc = qm_fail(st, QM_E_NOMEM, "sim: out of host memory");
        goto fail;
    }
    for (int d = 0; d < c->n_dev; ++d)
        order[d] = &c->info[d];
    qsort(order, (size_t)c->n_dev, sizeof *order, info_id_cmp);
    for (int d = 1; d < c->n_dev; ++d) {
        if (strcmp(order[d - 1]->id, order[d]->id) == 0) {
            rc = qm_fail(st, QM_E_ARG, "sim: device id '%s' appears twice (devices %d and %d)",
                         order[d]->id, (int)(order[d - 1] - c->info), (int)(order[d] - c->info));
            goto fail;
        }
    }
    for (int i = 0; i < desc->n_peers; ++i) {
        int a = desc->peers[i].a, b = desc->peers[i].b;
        if (a < 0 || b < 0 || a >= c->n_dev || b >= c->n_dev || a == b) {
            rc = qm_fail(st, QM_E_ARG, "sim: peer %d joins devices %d and %d; both must be "
                         "distinct and below %d", i, a, b, c->n_dev);
            goto fail;
        }
        c->links[c->n_links].a = a < b ? a : b;
        c->links[c->n_links].b = a < b ? b : a;
        c->n_links++;
    }
    qsort(c->links, (size_t)c->n_links, sizeof *c->links, sim_link_cmp);
    int w = 0; /* drop duplicate declarations of the same pair */
    for (int i = 0; i < c->n_links; ++i)
        if (w == 0 || sim_link_cmp(&c->links[w - 1], &c->links[i]) != 0)
            c->links[w++] = c->links[i];
    c->n_links = w;
    free(order);
    return qm_hal_create(&sim_ops, c, out, st);

fail:
    free(order);
    sim_destroy(c);
    return rc;
}

uint64_t qm_hal_sim_link_bytes(const qm_hal *hal, int a, int b)
{
    const qm_hal_ops *ops = qm_hal_ops_get(hal);
    if (!ops || ops->kind != QM_HAL_SIM)
        return 0;
    const sim_ctx *c = qm_hal_ctx(hal);
    if (a < 0 || b < 0 || a >= c->n_dev || b >= c->n_dev)
        return 0;
    const sim_link *l = sim_link_find(c, a, b);
    return l ? l->bytes[a == l->a ? 0 : 1] : 0;
}
