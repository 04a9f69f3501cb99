/* backend.c — the backend factory (see backend.h): a backend-neutral description mapped onto the
 * simulator's, the CUDA backend's and the fault shim's own descriptions. The only file above the
 * backends that includes their headers. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "backend.h"
#include "cuda_backend.h"
#include "fault.h"
#include "sim.h"
#include "status_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static qm_code open_sim(const qm_backend_desc *d, qm_hal **out, qm_status *st)
{
    if (d->n_devices < 1 || !d->devices)
        return qm_fail(st, QM_E_ARG, "backend: the simulator needs at least 1 device (got %d)",
                       d->n_devices);
    if (d->n_peers < 0 || (d->n_peers > 0 && !d->peers))
        return qm_fail(st, QM_E_ARG, "backend: %d peers without a peer list", d->n_peers);
    qm_sim_device_desc *dd = calloc((size_t)d->n_devices, sizeof *dd);
    qm_sim_peer_desc *pp = calloc((size_t)(d->n_peers ? d->n_peers : 1), sizeof *pp);
    if (!dd || !pp) {
        free(dd);
        free(pp);
        return qm_fail(st, QM_E_NOMEM, "backend: out of host memory for %d devices", d->n_devices);
    }
    for (int i = 0; i < d->n_devices; ++i) {
        const qm_backend_device *s = &d->devices[i];
        dd[i] = (qm_sim_device_desc){.id = s->id, .name = s->name, .memory_bytes = s->memory_bytes,
                                     .reserve_bytes = s->reserve_bytes,
                                     .hbm_bw_bytes_per_s = s->hbm_bw_bytes_per_s,
                                     .host_bw_bytes_per_s = s->host_bw_bytes_per_s,
                                     .numa = s->numa};
    }
    for (int i = 0; i < d->n_peers; ++i)
        pp[i] = (qm_sim_peer_desc){.a = d->peers[i].a, .b = d->peers[i].b};
    const qm_sim_desc sd = {.n_devices = d->n_devices, .devices = dd, .n_peers = d->n_peers,
                            .peers = pp, .memory = d->phantom ? QM_SIM_PHANTOM : QM_SIM_MATERIALIZED,
                            .poison = d->poison ? QM_SIM_POISON_ON : QM_SIM_POISON_ENV};
    const qm_code rc = qm_hal_sim_create(&sd, out, st);
    free(dd);
    free(pp);
    return rc;
}

qm_code qm_backend_open(const qm_backend_desc *desc, qm_hal **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!desc || !out)
        return qm_fail(st, QM_E_ARG, "backend: description and out must not be NULL");
    qm_hal *hal = NULL;
    qm_code rc;
    switch (desc->kind) {
    case QM_BACKEND_AUTO:
    case QM_BACKEND_SIM:
        rc = open_sim(desc, &hal, st);
        break;
    case QM_BACKEND_CUDA:
        rc = qm_hal_cuda_open_logical_at(desc->cuda_first_gpu, desc->cuda_devices, &hal, st);
        break;
    default:
        return qm_fail(st, QM_E_ARG, "backend: unknown backend kind %d", (int)desc->kind);
    }
    if (rc != QM_OK || !desc->fault)
        return (*out = hal, rc);
    const qm_backend_fault *f = desc->fault;
    qm_fault_config cfg = {.points = 0, .fail_at = f->fail_at, .code = f->code};
    if (f->points & QM_BACKEND_FAULT_ALLOC)
        cfg.points |= QM_FAULT_ALLOC;
    if (f->points & QM_BACKEND_FAULT_COPY)
        cfg.points |= QM_FAULT_COPY;
    if (f->points & QM_BACKEND_FAULT_LAUNCH)
        cfg.points |= QM_FAULT_LAUNCH;
    return qm_hal_fault_create(hal, &cfg, out, st); /* takes hal, also on failure */
}

int qm_backend_cuda_count(void) { return qm_cuda_device_count(); }

/* ---- start-up off the critical path ---------------------------------------------------------- */

struct qm_backend_warmup {
    pthread_t thread;
    int gpu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started;   /* the start-up is done (the thread goes on loading kernels) */
    double seconds; /* the start-up's time, written before `started` */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *warmup_run(void *arg)
{
    qm_backend_warmup *w = arg;
    const double t0 = mono_s();
    const bool ok = qm_hal_cuda_start(w->gpu, NULL) == QM_OK; /* a failure shows again, named, at the open */
    pthread_mutex_lock(&w->mu);
    w->seconds = mono_s() - t0;
    w->started = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (ok)
        qm_hal_cuda_preload(w->gpu); /* beside the caller's open and page-locking */
    return NULL;
}

qm_code qm_backend_warmup_start(qm_backend_kind kind, int gpu, qm_backend_warmup **out,
                                qm_status *st)
{
    *out = NULL;
    if (kind != QM_BACKEND_CUDA)
        return QM_OK; /* the simulator has nothing to start */
    qm_backend_warmup *w = calloc(1, sizeof *w);
    if (!w)
        return qm_fail(st, QM_E_NOMEM, "backend: out of host memory for the start-up thread");
    w->gpu = gpu;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, warmup_run, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return qm_fail(st, QM_E_NOMEM, "backend: cannot start the start-up thread");
    }
    *out = w;
    return QM_OK;
}

void qm_backend_warmup_join(qm_backend_warmup *w, double *start_s, double *wait_s)
{
    double s = 0, waited = 0;
    if (w) {
        const double t0 = mono_s();
        pthread_mutex_lock(&w->mu);
        while (!w->started)
            pthread_cond_wait(&w->cv, &w->mu);
        s = w->seconds;
        pthread_mutex_unlock(&w->mu);
        waited = mono_s() - t0;
    }
    if (start_s)
        *start_s = s;
    if (wait_s)
        *wait_s = waited;
}

void qm_backend_warmup_end(qm_backend_warmup *w)
{
    if (!w)
        return;
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void qm_backend_host_prepare(qm_backend_kind kind, const uint64_t *bytes, int n)
{
    for (int k = 0; kind == QM_BACKEND_CUDA && k < n; ++k)
        qm_hal_cuda_host_prepare(bytes[k]);
}

void qm_backend_host_release(void) { qm_hal_cuda_host_release(); }
