/* test_backend_warmup.c — the CUDA start-up off the critical path (qm_backend_warmup in
 * hal/backend.h, used by `qmesh encode --backend cuda`): nothing starts for the simulator; a CUDA
 * start-up thread is always joined and freed, also when the run stops before the backend is opened
 * (a missing input) and when the open fails (no GPU here: E-UNSUPPORTED with the backend's own
 * message); an encode on the simulator reports zeros. No timing is asserted beyond signs (the
 * sanitizer build checks that nothing leaks). */
#include "backend.h"
#include "encode.h"
#include "testlib.h"

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

static qm_code run(const char *input, qm_backend_kind kind, qm_encode_result *r, qm_status *st)
{
    qm_encode_job job;
    qm_encode_job_init(&job);
    job.input = input;
    job.backend = kind;
    job.host_available_bytes = (uint64_t)1 << 40;
    const qm_code rc = qm_encode_run(&job, r, st);
    return rc;
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
    CHECK_OK(qm_backend_warmup_start(QM_BACKEND_CUDA, 0, &w, &st));
    CHECK(w != NULL);
    qm_backend_warmup_join(w, &s, &waited);
    CHECK(s >= 0 && waited >= 0);

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
    unlink(in);
    return qm_test_end("test_backend_warmup");
}
