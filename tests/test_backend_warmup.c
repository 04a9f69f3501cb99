/* test_backend_warmup.c — the CUDA start-up off the critical path (qm_backend_warmup in
 * hal/backend.h, used by `qmesh encode --backend cuda`): nothing starts for the simulator; a CUDA
 * start-up thread (which loads the data path's kernels after the start-up) is joined, joined
 * again, or ended without a join, and always ended and freed, also when the run stops before the backend is opened
 * (a missing input) and when the open fails (no GPU here: E-UNSUPPORTED with the backend's own
 * message); an encode on the simulator reports zeros. No timing is asserted beyond signs (the
 * sanitizer build checks that nothing leaks). */
#include "backend.h"
#include "cuda_backend.h"
#include "encode.h"
#include "qmesh.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A (4,) float64 .npy of 3, 4, 0, 0. */
static void write_npy(const char *path)
{
    char head[128];
    memset(head, ' ', sizeof head);
    static const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }";
    memcpy(head, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(head + 10, dict, strlen(dict));
    head[127] = '\n';
    const double x[4] = {3, 4, 0, 0};
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(head, 1, sizeof head, f);
        fwrite(x, sizeof x[0], 4, f);
        fclose(f);
    }
}

static qm_code run_out(const char *input, const char *out, qm_backend_kind kind,
                       qm_encode_result *r, qm_status *st)
{
    qm_encode_job job;
    qm_encode_job_init(&job);
    job.input = input;
    job.out = out;
    job.backend = kind;
    job.host_available_bytes = (uint64_t)1 << 40;
    const qm_code rc = qm_encode_run(&job, r, st);
    return rc;
}

static qm_code run(const char *input, qm_backend_kind kind, qm_encode_result *r, qm_status *st)
{
    return run_out(input, NULL, kind, r, st);
}

int main(void)
{
    qm_status st;
    qm_backend_warmup *w = (qm_backend_warmup *)&st; /* must be overwritten */
    CHECK_OK(qm_backend_warmup_start(QM_BACKEND_SIM, 0, &w, &st));
    CHECK(w == NULL);
    double s = -1, waited = -1;
    qm_backend_warmup_join(NULL, &s, &waited);
    CHECK(s == 0 && waited == 0);
    qm_backend_warmup_end(NULL);
    CHECK_OK(qm_backend_warmup_start(QM_BACKEND_CUDA, 0, &w, &st));
    CHECK(w != NULL);
    qm_backend_warmup_join(w, &s, &waited);
    CHECK(s >= 0 && waited >= 0);
    qm_backend_warmup_join(w, &s, &waited); /* joined again: the same start-up time */
    CHECK(s >= 0 && waited >= 0);
    qm_backend_warmup_end(w);
    /* ended without a join (a run that stops early) */
    CHECK_OK(qm_backend_warmup_start(QM_BACKEND_CUDA, 0, &w, &st));
    qm_backend_warmup_end(w);

    char in[64];
    snprintf(in, sizeof in, "/tmp/qmesh-warmup-%d.npy", (int)getpid());
    write_npy(in);
    qm_encode_result r;
    /* stops before the backend: the start-up thread is joined on the failure path */
    CHECK(run("/nonexistent/x.npy", QM_BACKEND_CUDA, &r, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "/nonexistent/x.npy");
    CHECK(r.seconds_backend_start == 0 && r.seconds_backend_wait == 0); /* not reached */
    qm_encode_result_fini(&r);
    if (qm_backend_cuda_count() == 0) {
        /* the open fails with the backend's own message, after the join */
        const qm_code rc = run(in, QM_BACKEND_CUDA, &r, &st);
        CHECK(rc == QM_E_UNSUPPORTED);
        CHECK(r.seconds_backend_start >= 0 && r.seconds_backend_wait >= 0);
        qm_encode_result_fini(&r);
    }
    /* the simulator: nothing started, zeros */
    CHECK_OK(run(in, QM_BACKEND_SIM, &r, &st));
    CHECK(r.seconds_backend_start == 0 && r.seconds_backend_wait == 0);
    CHECK(r.norm_max_error < 1e-15);
    qm_encode_result_fini(&r);
    /* prepared staging */
    const uint64_t MiB = (uint64_t)1 << 20;
    const uint64_t sizes[3] = {64 * MiB, 3 * MiB, 0};
    uint64_t bytes = 1;
    qm_backend_host_prepare(QM_BACKEND_SIM, sizes, 3);
    CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
    qm_backend_host_prepare(QM_BACKEND_CUDA, sizes, 3); /* 0 bytes: nothing */
#if QM_TEST_CUDA_BUILT
    CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 2 && bytes == 68 * MiB); /* 3 MiB -> 4 MiB */
#else
    CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0); /* no CUDA backend: nothing */
#endif
    qm_backend_host_release();
    CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
    if (qm_backend_cuda_count() > 0) {
        qm_hal *h = NULL;
        const qm_backend_desc d = {.kind = QM_BACKEND_CUDA, .cuda_devices = 1};
        CHECK_OK(qm_backend_open(&d, &h, &st));
        const uint64_t two[2] = {64 * MiB, 2 * MiB};
        qm_backend_host_prepare(QM_BACKEND_CUDA, two, 2);
        void *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(qm_hal_host_alloc(h, MiB, &a, &st)); /* 2 MiB rounded: takes the 2 MiB spare */
        CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 1 && bytes == 64 * MiB);
        CHECK_OK(qm_hal_host_alloc(h, 20 * MiB, &b, &st)); /* 64 MiB is over twice 20: new memory */
        CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 1 && bytes == 64 * MiB);
        CHECK_OK(qm_hal_host_alloc(h, 40 * MiB, &c, &st)); /* 64 MiB is at most twice 40: taken */
        CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
        CHECK(qm_hal_host_is_pinned(h, a) && qm_hal_host_is_pinned(h, b) && qm_hal_host_is_pinned(h, c));
        /* the taken spare works as staging: 40 MiB there and back */
        qm_hal_buf *dev = NULL;
        CHECK_OK(qm_hal_buf_alloc(h, 0, 40 * MiB, &dev, &st));
        for (uint64_t i = 0; i < 40 * MiB; ++i)
            ((unsigned char *)c)[i] = (unsigned char)(i * 7 + 3);
        CHECK_OK(qm_hal_copy_h2d(h, dev, 0, c, 40 * MiB, NULL, &st));
        memset(b, 0, 20 * MiB);
        CHECK_OK(qm_hal_copy_d2h(h, b, dev, 20 * MiB, 20 * MiB, NULL, &st));
        CHECK(memcmp(b, (unsigned char *)c + 20 * MiB, 20 * MiB) == 0);
        /* a block given back stays page-locked as a spare, taken back by the next of its size */
        int reg = -1;
        qm_hal_host_free(h, a);
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 1 && bytes == 2 * MiB && reg == 1);
        CHECK_OK(qm_hal_host_alloc(h, 2 * MiB, &a, &st));
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 0 && bytes == 0 && reg == 0);
        CHECK(qm_hal_host_is_pinned(h, a));
        memset(a, 0x5a, 2 * MiB);
        CHECK_OK(qm_hal_copy_h2d(h, dev, 0, a, 2 * MiB, NULL, &st));
        CHECK_OK(qm_hal_copy_d2h(h, b, dev, 0, 2 * MiB, NULL, &st));
        CHECK(((unsigned char *)b)[0] == 0x5a && ((unsigned char *)b)[2 * MiB - 1] == 0x5a);
        qm_hal_buf_free(h, dev);
        qm_hal_host_free(h, a);
        qm_hal_host_free(h, b);
        qm_hal_host_free(h, c);
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 3 && bytes == 86 * MiB && reg == 3);
        qm_backend_host_release();
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 0 && bytes == 0 && reg == 0);
        /* spares prepared ahead and registered but not taken yet (an encode's output staging
         * while its ingest runs; here 8 of them) do not count against the blocks kept: the ring's
         * 64 MiB given back beside them stays a registered spare, not unregistered on the spot */
        const uint64_t eight[8] = {2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB,
                                   2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB};
        qm_backend_host_prepare(QM_BACKEND_CUDA, eight, 8);
        qm_hal_cuda_preload(0); /* registers them, as the start-up thread does */
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 8 && bytes == 16 * MiB && reg == 8);
        void *ring = NULL;
        CHECK_OK(qm_hal_host_alloc(h, 64 * MiB, &ring, &st)); /* no spare fits: new memory */
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 8 && bytes == 16 * MiB && reg == 8);
        qm_hal_host_free(h, ring);
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 9 && bytes == 80 * MiB && reg == 9);
        qm_hal_destroy(h); /* unregisters and frees them */
        CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 0 && bytes == 0 && reg == 0);
        /* an encode prepares its staging while CUDA starts, and leaves no spare behind */
        CHECK_OK(run(in, QM_BACKEND_CUDA, &r, &st));
        CHECK(r.norm_max_error < 1e-15);
        CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
        qm_encode_result_fini(&r);
        /* with an output: its staging (one page-locked block of 8 chunks) is prepared too and
         * taken by the write, and none is left behind; the file holds the normalized state */
        char out[80];
        snprintf(out, sizeof out, "/tmp/qmesh-warmup-out-%d.npy", (int)getpid());
        CHECK_OK(run_out(in, out, QM_BACKEND_CUDA, &r, &st));
        CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
        qm_encode_result_fini(&r);
        FILE *f = fopen(out, "rb");
        unsigned char got[128 + 64] = {0};
        CHECK(f && fread(got, 1, sizeof got, f) == sizeof got && fgetc(f) == EOF);
        if (f)
            fclose(f);
        double amp[8];
        memcpy(amp, got + 128, sizeof amp);
        CHECK(memcmp(got, "\x93NUMPY", 6) == 0 && strstr((const char *)got + 10, "'<c16'") != NULL);
        CHECK(fabs(amp[0] - 0.6) < 1e-15 && amp[1] == 0 && fabs(amp[2] - 0.8) < 1e-15 && amp[3] == 0 &&
              amp[4] == 0 && amp[5] == 0 && amp[6] == 0 && amp[7] == 0);
        unlink(out);
    }
    /* a C API context prepares its first encode's staging while CUDA starts (here the norm's
     * one sum: a 2 MiB block; a 4-value input makes no ring), and its first encode leaves none */
    {
        qm_scenario *sc = NULL;
        CHECK_OK(qm_scenario_open(NULL, &sc, &st));
        qm_request rq;
        qm_request_init(&rq);
        rq.qubits = 2;
        rq.dtype = QM_DTYPE_COMPLEX128;
        rq.features = 4;
        qm_context *ctx = NULL;
        CHECK_OK(qm_context_create(sc, &rq, &ctx, &st));
        if (qm_backend_cuda_count() == 0) {
            CHECK(qm_context_open(ctx, QM_BACKEND_CUDA, &st) == QM_E_UNSUPPORTED);
            CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0); /* released on failure */
        } else {
            CHECK_OK(qm_context_open(ctx, QM_BACKEND_CUDA, &st));
            int reg = -1; /* page-locked on the start-up thread during the open */
            CHECK(qm_hal_cuda_host_spares(&bytes, &reg) == 1 && bytes == 2 * MiB && reg == 1);
            const double x[4] = {3, 4, 0, 0};
            const qm_host_data hd = {QM_DTYPE_FLOAT64, x, 1, 4};
            qm_state *s1 = NULL;
            CHECK_OK(qm_context_encode(ctx, &hd, &s1, &st));
            CHECK(qm_hal_cuda_host_spares(&bytes, NULL) == 0 && bytes == 0);
            double amp[8] = {0};
            CHECK_OK(qm_state_read(s1, 0, 4, QM_DTYPE_COMPLEX128, amp, &st));
            CHECK(fabs(amp[0] - 0.6) < 1e-15 && fabs(amp[2] - 0.8) < 1e-15 && amp[4] == 0 && amp[1] == 0);
            qm_state_destroy(s1);
        }
        qm_context_destroy(ctx);
        qm_scenario_destroy(sc);
    }
    unlink(in);
    return qm_test_end("test_backend_warmup");
}
