#define _POSIX_C_SOURCE 200809L
/* test_io_out.c — the output side of engine/io.h added for issue 13 (docs/io.md): temporary names,
 * the writer's separate sync, the I/O fault hook and its step count, the --out-dir stage / swap /
 * remove, the checks before any work, and the sweep of dead runs' temporaries. Label unit. */
#include "io.h"
#include "io_internal.h" /* qm_io_step_take: a pool thread's steps, taken by hand */
#include "testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

static const char *at(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

static bool exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void write_bytes(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count_entries(const char *dir)
{
    char cmd[256], out[64];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    return qm_test_run(cmd, out, sizeof out) == 0 ? atoi(out) : -1;
}

static void test_tmp_name(void)
{
    char p[128], t[512], want[256];
    at(p, sizeof p, "x.npy");
    CHECK(qm_out_tmp_name(p, t, sizeof t) > 0);
    snprintf(want, sizeof want, "%s/.x.npy.qmesh-tmp.", g_dir);
    CHECK(strncmp(t, want, strlen(want)) == 0);
    char pid[32];
    snprintf(pid, sizeof pid, ".%ld", (long)getpid());
    CHECK(strcmp(t + strlen(t) - strlen(pid), pid) == 0);
    CHECK(strchr(t + strlen(want), '/') == NULL);
    CHECK(qm_out_tmp_name(p, t, 8) == 0); /* does not fit */
    CHECK(qm_out_tmp_name("rel.npy", t, sizeof t) > 0 && strncmp(t, "./.rel.npy.qmesh-tmp.", 21) == 0);
}

static void test_writer_sync_and_faults(void)
{
    char p[128], t[512];
    qm_status st;
    at(p, sizeof p, "w.npy");
    qm_out_tmp_name(p, t, sizeof t);
    const double amp[4] = {1, 0, 0, 0};
    const uint64_t shape[1] = {2};
    qm_npy_writer *w = NULL;

    /* the steps of one small file: create, header, data, fsync, close, rename */
    qm_io_fault_set(0, 0);
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp, 2, &st) == QM_OK);
    CHECK(qm_npy_writer_sync(w, &st) == QM_OK);
    CHECK(exists(t) && !exists(p)); /* synced, not renamed */
    CHECK(qm_npy_writer_sync(w, &st) == QM_OK); /* again: a no-op */
    CHECK(qm_npy_writer_commit(w, &st) == QM_OK);
    CHECK(exists(p) && !exists(t));
    CHECK(qm_io_fault_steps() == 6);
    CHECK_EQ_U64(qm_npy_file_bytes(QM_DTYPE_COMPLEX128, 1, shape), 128 + 32);

    /* abort after a sync removes the temporary; a short sync is E-ARG */
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp, 1, &st) == QM_OK);
    CHECK(qm_npy_writer_sync(w, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "w.npy: not committed: wrote 1 of 2 elements");
    qm_npy_writer_abort(w);
    CHECK(!exists(t));

    /* every step failing once: the code, the message, the old file intact, no temporary */
    static const struct { long k; int err; qm_code code; const char *part; } cases[] = {
        {1, ENOSPC, QM_E_OUTPUT, "w.npy: cannot create the temporary file"},
        {2, EFBIG, QM_E_OUTPUT, "w.npy: the file-size limit stopped the write at 0 B of 160 B (0 of 160 bytes; RLIMIT_FSIZE"},
        {3, ENOSPC, QM_E_OUTPUT, "w.npy: No space left on device after 128 B of 160 B (128 of 160 bytes)"},
        {3, EIO, QM_E_IO, "w.npy: writing "},
        {4, EIO, QM_E_IO, "w.npy: fsync of "},
        {5, EIO, QM_E_IO, "w.npy: closing "},
        {6, EIO, QM_E_IO, "w.npy: cannot rename "},
    };
    write_bytes(p, "old");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        qm_io_fault_set(cases[i].k, cases[i].err);
        qm_code rc = qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st);
        if (rc == QM_OK)
            rc = qm_npy_writer_write(w, amp, 2, &st);
        if (rc == QM_OK)
            rc = qm_npy_writer_commit(w, &st);
        else
            qm_npy_writer_abort(w);
        w = NULL;
        CHECK(rc == cases[i].code);
        CHECK_ERR(st, cases[i].code, cases[i].part);
        CHECK(!exists(t));
        struct stat sb;
        CHECK(stat(p, &sb) == 0 && sb.st_size == 3);
    }
    /* text files */
    qm_io_fault_set(2, EIO);
    CHECK(qm_atomic_write_text(p, "new", &st) == QM_E_IO);
    CHECK(!exists(t));
    qm_io_fault_set(0, 0);
    unlink(p);
}

/* The parallel output path: the size reserved up front (one step, E-OUTPUT on a full device),
 * chunks written at their offsets by the pool's threads from the caller's buffers, the bytes the
 * same as one sequential writer's, and QM_FAULT_IO=K failing the K-th submitted chunk whatever
 * the threads do (the message names that chunk's byte). */
static void test_pool(void)
{
    char p[128], t[512];
    qm_status st;
    at(p, sizeof p, "pool.npy");
    qm_out_tmp_name(p, t, sizeof t);
    enum { N = 4000, CH = 7, NB = 3 }; /* 4000 complex128 in chunks of 7 (the last one short) */
    double *want = malloc(2 * N * sizeof *want);
    for (int i = 0; i < 2 * N; ++i)
        want[i] = (double)i * 0.25 - 3.0;
    double *bufs[NB];
    for (int b = 0; b < NB; ++b)
        bufs[b] = malloc(CH * 16);
    const uint64_t shape[1] = {N};
    const int n_chunks = (N + CH - 1) / CH;
    for (long k = 0; k <= 5; k += 5) { /* 0: no fault; 5: the 2nd chunk (create, header, reserve, chunk 0) */
        qm_io_fault_set(k, ENOSPC);
        qm_out_pool *pool = NULL;
        qm_npy_writer *w = NULL;
        CHECK_OK(qm_out_pool_create((void *const *)bufs, NB, 2, &pool, &st));
        CHECK_OK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st));
        CHECK_OK(qm_npy_writer_reserve(w, &st));
        for (int c = 0; pool && w && c < n_chunks; ++c) {
            const uint64_t n = c == n_chunks - 1 ? N - (uint64_t)c * CH : CH;
            int idx;
            double *b = qm_out_pool_acquire(pool, &idx);
            memcpy(b, want + 2 * c * CH, n * 16);
            qm_out_pool_submit(pool, idx, w, (uint64_t)c * CH, n);
        }
        const qm_code rc = pool ? qm_out_pool_drain(pool, &st) : QM_E_INTERNAL;
        if (k == 0) {
            CHECK(rc == QM_OK);
            CHECK(qm_io_fault_steps() == 3 + n_chunks);
            CHECK_OK(qm_npy_writer_commit(w, &st));
            FILE *f = fopen(p, "rb");
            char *got = malloc(128 + N * 16);
            CHECK(f && fread(got, 1, 128 + N * 16, f) == 128 + N * 16 && fgetc(f) == EOF);
            CHECK(got && memcmp(got + 128, want, N * 16) == 0);
            if (f)
                fclose(f);
            free(got);
        } else {
            CHECK(rc == QM_E_OUTPUT);
            CHECK_ERR(st, QM_E_OUTPUT, "pool.npy: No space left on device after 240 B of 62.62 KiB (240 of 64128 bytes)");
            CHECK(qm_npy_writer_sync(w, &st) == QM_E_IO);
            qm_npy_writer_abort(w);
            CHECK(!exists(t));
        }
        qm_out_pool_destroy(pool);
    }
    /* the pool's threads in the order that made test_pool fail once in CI (session 11): chunk 1's
     * write fails first, chunk 0's starts after it. Chunk 0 still writes (its own step, no fault)
     * and so does not report a failure of its own, numbered before chunk 1's; the file stays
     * uncommittable */
    {
        qm_npy_writer *w2 = NULL;
        qm_io_fault_set(5, ENOSPC); /* create, header, reserve, then the steps below: 4, 5 */
        CHECK_OK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w2, &st));
        CHECK_OK(qm_npy_writer_reserve(w2, &st));
        const long s0 = qm_io_step_take(), s1 = qm_io_step_take();
        CHECK(s1 == s0 + 1);
        CHECK(qm_npy_writer_write_at(w2, CH, want + 2 * CH, CH, s1, &st) == QM_E_OUTPUT);
        CHECK_ERR(st, QM_E_OUTPUT, "pool.npy: No space left on device after 240 B of 62.62 KiB");
        qm_status_clear(&st);
        CHECK(qm_npy_writer_write_at(w2, 0, want, CH, s0, &st) == QM_OK);
        CHECK(qm_npy_writer_write(w2, want, 1, &st) == QM_E_IO);
        CHECK_ERR(st, QM_E_IO, "pool.npy: not written: an earlier write to");
        CHECK(qm_npy_writer_sync(w2, &st) == QM_E_IO);
        qm_npy_writer_abort(w2);
        CHECK(!exists(t));
        qm_io_fault_set(0, 0);
    }
    /* the reservation itself fails on a full device: E-OUTPUT naming the bytes */
    qm_npy_writer *w = NULL;
    qm_io_fault_set(3, ENOSPC);
    CHECK_OK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st));
    CHECK(qm_npy_writer_reserve(w, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "pool.npy: cannot reserve 62.62 KiB for the file (64128 bytes): No space left on device; free space or choose another location");
    qm_npy_writer_abort(w);
    CHECK(!exists(t));
    qm_io_fault_set(0, 0);
    CHECK(qm_out_pool_create((void *const *)bufs, 0, 2, &(qm_out_pool *){NULL}, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "output pool: at least 1 buffer and 1 thread are needed (got 0, 2)");
    for (int b = 0; b < NB; ++b)
        free(bufs[b]);
    free(want);
    unlink(p);
}

static void test_dir_swap(void)
{
    char d[128], t[512], f[600];
    qm_status st;
    bool replaced = true;
    at(d, sizeof d, "outdir");
    /* a new directory: a plain rename */
    CHECK(qm_out_dir_stage(d, t, sizeof t, &st) == QM_OK);
    snprintf(f, sizeof f, "%s/a", t);
    write_bytes(f, "1");
    CHECK(!exists(d));
    CHECK(qm_out_dir_swap(d, t, &replaced, &st) == QM_OK && !replaced);
    CHECK(!exists(t) && count_entries(d) == 1);
    /* an existing one: exchanged; the temporary holds the previous content */
    CHECK(qm_out_dir_stage(d, t, sizeof t, &st) == QM_OK);
    snprintf(f, sizeof f, "%s/b", t);
    write_bytes(f, "2");
    CHECK(qm_out_dir_swap(d, t, &replaced, &st) == QM_OK && replaced);
    snprintf(f, sizeof f, "%s/b", d);
    CHECK(exists(f));
    snprintf(f, sizeof f, "%s/a", t);
    CHECK(exists(f));
    qm_out_dir_remove(t);
    CHECK(!exists(t));
    /* a failed exchange leaves both as they were */
    CHECK(qm_out_dir_stage(d, t, sizeof t, &st) == QM_OK);
    qm_io_fault_set(1, EIO);
    CHECK(qm_out_dir_swap(d, t, &replaced, &st) == QM_E_IO && !replaced);
    CHECK_ERR(st, QM_E_IO, "outdir: cannot exchange it with ");
    snprintf(f, sizeof f, "%s/b", d);
    CHECK(exists(f) && exists(t) && count_entries(t) == 0);
    qm_out_dir_remove(t);
    /* a failed mkdir */
    qm_io_fault_set(1, ENOSPC);
    CHECK(qm_out_dir_stage(d, t, sizeof t, &st) == QM_E_OUTPUT && t[0] == '\0');
    CHECK_ERR(st, QM_E_OUTPUT, "outdir: cannot create the temporary directory");
    qm_io_fault_set(0, 0);
    qm_out_dir_remove(d);
    CHECK(!exists(d));
}

static void test_check(void)
{
    char p[128], q[160];
    qm_status st;
    at(p, sizeof p, "adir");
    mkdir(p, 0777);
    CHECK(qm_out_check(p, false, 10, 10, false, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "adir: is a directory; --out names a file");
    CHECK(qm_out_check(p, true, 10, 10, false, &st) == QM_OK); /* empty: replaceable */
    snprintf(q, sizeof q, "%s/notes.txt", p);
    write_bytes(q, "x");
    CHECK(qm_out_check(p, true, 10, 10, false, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "adir: holds 1 entry but no manifest.json");
    CHECK(qm_out_check(p, true, 10, 10, true, &st) == QM_OK); /* --force */
    CHECK(qm_out_check(q, true, 10, 10, false, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "notes.txt: exists and is not a directory");
    snprintf(q, sizeof q, "%s/nodir/x.npy", g_dir);
    CHECK(qm_out_check(q, false, 10, 10, false, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "nodir does not exist; create it first");
    at(q, sizeof q, "x.npy");
    CHECK(qm_out_check(q, false, UINT64_MAX / 2, 10, false, &st) == QM_E_OUTPUT);
    CHECK_ERR(st, QM_E_OUTPUT, "x.npy: --out needs 8192.00 PiB but ");
    CHECK_ERR(st, QM_E_OUTPUT, " bytes); free space or choose another location");
    /* the file-size limit (lowering the soft limit is always allowed; put it back after) */
    struct rlimit old;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct rlimit lim = old;
    lim.rlim_cur = 4096;
    if (old.rlim_max == RLIM_INFINITY || old.rlim_max >= 4096) {
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        CHECK(qm_out_check(q, false, 8192, 8192, false, &st) == QM_E_OUTPUT);
        CHECK_ERR(st, QM_E_OUTPUT, "x.npy: a file of 8.00 KiB (8192 bytes) exceeds the file-size limit 4.00 KiB (RLIMIT_FSIZE 4096 bytes)");
        CHECK(qm_out_check(q, false, 4096, 4096, false, &st) == QM_OK);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    }
    CHECK(qm_out_check(NULL, false, 1, 1, false, &st) == QM_E_ARG);
}

static void test_stale_sweep(void)
{
    char target[128], name[700], host[80] = {0}, cmd[800], out[128];
    qm_status st;
    at(target, sizeof target, "s.npy");
    /* this host's tag, as io_out.c forms it */
    snprintf(cmd, sizeof cmd, "uname -n | cut -c1-64 | tr -c 'A-Za-z0-9_\\n-' '_'");
    CHECK(qm_test_run(cmd, out, sizeof out) == 0);
    sscanf(out, "%79s", host);
    const pid_t child = fork();
    if (child == 0)
        _exit(0);
    CHECK(child > 0 && waitpid(child, NULL, 0) == child); /* dead and reaped */
    const long pids[3] = {(long)child, (long)getppid(), (long)child};
    const char *hosts[3] = {host, host, "otherhost"};
    for (int i = 0; i < 3; ++i) {
        snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.%s.%ld", g_dir, hosts[i], pids[i]);
        write_bytes(name, "t");
    }
    /* a dead run's temporary directory with files, and a fallback swap cut between its renames */
    snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.%s.%ld.x", g_dir, host, (long)child);
    write_bytes(name, "not ours: no pid at the end");
    char dd[128];
    at(dd, sizeof dd, "sd");
    snprintf(name, sizeof name, "%s/.sd.qmesh-old.%s.%ld", g_dir, host, (long)child);
    CHECK(mkdir(name, 0777) == 0);
    snprintf(cmd, sizeof cmd, "%s/manifest.json", name);
    write_bytes(cmd, "{}");
    int n = -1;
    CHECK(qm_out_stale_sweep(target, &n, &st) == QM_OK);
    CHECK(n == 1);
    snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.%s.%ld", g_dir, host, (long)child);
    CHECK(!exists(name));
    snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.%s.%ld", g_dir, host, (long)getppid());
    CHECK(exists(name));
    unlink(name);
    snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.otherhost.%ld", g_dir, (long)child);
    CHECK(exists(name));
    unlink(name);
    snprintf(name, sizeof name, "%s/.s.npy.qmesh-tmp.%s.%ld.x", g_dir, host, (long)child);
    CHECK(exists(name));
    unlink(name);
    /* the old directory comes back when the target is missing */
    CHECK(qm_out_stale_sweep(dd, &n, &st) == QM_OK && n == 1);
    snprintf(cmd, sizeof cmd, "%s/manifest.json", dd);
    CHECK(exists(cmd));
    qm_out_dir_remove(dd);
    CHECK(qm_out_stale_sweep(NULL, &n, &st) == QM_E_ARG);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qmesh-test-io-out-%d", (int)getpid());
    CHECK(mkdir(g_dir, 0700) == 0);
    test_tmp_name();
    test_writer_sync_and_faults();
    test_pool();
    test_dir_swap();
    test_check();
    test_stale_sweep();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return qm_test_end("test_io_out");
}
