#define _POSIX_C_SOURCE 200809L
/* test_encode_cli.c — `qmesh encode` end to end: the digits data set against an independent
 * reference computed here (zlib + long double, not qmesh), output formats, and every bad input
 * leaving no output file. Arguments: the qmesh binary, the source dir. The data set is made here
 * (make_digits: the shape of the handwritten digits set, 1797 rows of 64 pixels in 0..16 and a label
 * column, gzip-compressed), so the test needs no download; scripts/fetch-digits.sh fetches the real
 * set for the demo only. */
#include "testlib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char *qmesh, *srcdir;
static char tmpdir[256];


static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Read a complex .npy written by qmesh: returns the data (malloc'd) and its element count. */
static void *read_npy(const char *path, const char *descr, uint64_t *n_elems, size_t es)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char pre[10];
    void *data = NULL;
    if (fread(pre, 1, 10, f) == 10 && memcmp(pre, "\x93NUMPY\x01\x00", 8) == 0) {
        unsigned hl = pre[8] | (pre[9] << 8);
        char *hdr = calloc(1, hl + 1);
        if (hdr && fread(hdr, 1, hl, f) == hl && strstr(hdr, descr) && (10 + hl) % 64 == 0) {
            long pos = ftell(f);
            fseek(f, 0, SEEK_END);
            long end = ftell(f);
            fseek(f, pos, SEEK_SET);
            *n_elems = (uint64_t)(end - pos) / (2 * es);
            data = malloc((size_t)(end - pos));
            if (data && fread(data, 1, (size_t)(end - pos), f) != (size_t)(end - pos)) {
                free(data);
                data = NULL;
            }
        }
        free(hdr);
    }
    fclose(f);
    return data;
}

static void test_digits(const char *digits)
{
    char out[8192], path[1024];
    snprintf(path, sizeof path, "%s/digits.npy", tmpdir);
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 64 --out %s", qmesh, digits, path);
    CHECK(rc == 0);
    CHECK(strstr(out, "1797 samples x 64 features, float64") != NULL);
    CHECK(strstr(out, "request:  6 qubits, complex128") != NULL);
    CHECK(strstr(out, "norm:     max |sum |psi|^2 - 1| =") != NULL);
    /* materialize's measured phases, named as the plan's estimates */
    CHECK(strstr(out, "\nmeasured on this machine (sim backend): ingest ") != NULL && strstr(out, ", local_norm ") != NULL &&
          strstr(out, ", norm_allreduce ") != NULL && strstr(out, ", encode ") != NULL);
    if (rc != 0)
        fprintf(stderr, "%s\n", out);
    uint64_t n = 0;
    double *amp = read_npy(path, "'descr': '<c16', 'fortran_order': False, 'shape': (1797, 64)", &n, 8);
    CHECK(amp != NULL);
    CHECK_EQ_U64(n, 1797 * 64);
    /* the reference: read the gzip CSV here, drop the label, normalise in long double */
    gzFile gz = gzopen(digits, "rb");
    CHECK(gz != NULL);
    char line[4096];
    uint64_t row = 0;
    double maxerr = 0, maxnorm = 0;
    while (gz && amp && gzgets(gz, line, sizeof line) && row < 1797) {
        double v[65];
        int k = 0;
        for (char *s = line, *e; k < 65; s = e + 1, ++k) {
            v[k] = strtod(s, &e);
            if (*e != ',')
                break;
        }
        long double s2 = 0;
        for (int j = 0; j < 64; ++j)
            s2 += (long double)v[j] * v[j];
        double t = 0;
        for (int j = 0; j < 64; ++j) {
            double want = (double)(v[j] / sqrtl(s2));
            double got = amp[2 * (row * 64 + j)];
            double err = fabs(got - want);
            if (err > maxerr)
                maxerr = err;
            if (amp[2 * (row * 64 + j) + 1] != 0.0)
                maxerr = 1;
            t += got * got;
        }
        if (fabs(t - 1) > maxnorm)
            maxnorm = fabs(t - 1);
        row++;
    }
    if (gz)
        gzclose(gz);
    CHECK_EQ_U64(row, 1797);
    CHECK(maxerr < 1e-12);
    CHECK(maxnorm < 1e-12);
    printf("digits: %llu states, max |amp - reference| = %.3e, max |norm - 1| = %.3e\n",
           (unsigned long long)row, maxerr, maxnorm);
    free(amp);

    /* complex64, per-shard output with a manifest, on a library scenario */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/shards", tmpdir);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 64 --dtype complex64 --scenario "
             "%s/scenarios/dgx-h100.yaml --out-dir %s --json", qmesh, digits, srcdir, dir);
    CHECK(rc == 0);
    CHECK(strstr(out, "\"max_abs_error\"") != NULL);
    CHECK(strstr(out, "\"measured_s\": {\n    \"ingest\": ") != NULL);
    CHECK(strstr(out, "\"norm_allreduce\": ") != NULL);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *m = fopen(path, "r");
    CHECK(m != NULL);
    if (m) {
        size_t k = fread(out, 1, sizeof out - 1, m);
        out[k] = '\0';
        fclose(m);
        CHECK(strstr(out, "\"format\": \"qmesh-shards/1\"") != NULL);
        CHECK(strstr(out, "\"batch\": 1797") != NULL);
        CHECK(strstr(out, "\"dtype\": \"complex64\"") != NULL);
        CHECK(strstr(out, "\"device\": \"n0.g7\"") != NULL);
        CHECK(strstr(out, "\"file\": \"shard-0007.npy\"") != NULL);
    }
    snprintf(path, sizeof path, "%s/shard-0000.npy", dir);
    float *f = read_npy(path, "'descr': '<c8'", &n, 4);
    CHECK(f != NULL && n > 0 && n % 64 == 0);
    free(f);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void test_errors(void)
{
    char out[8192], in[512], dst[512];
    snprintf(dst, sizeof dst, "%s/out.npy", tmpdir);
    /* NaN in sample 2, feature 3 */
    snprintf(in, sizeof in, "%s/nan.csv", tmpdir);
    const char *csv = "1,2,3,4\n5,6,7,8\n1,2,3,nan\n";
    write_file(in, csv, strlen(csv));
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, in, dst);
    CHECK(rc == 1);
    CHECK(strstr(out, "error[E-INPUT]: encode: zero or non-finite norm: sample 2, feature 3 is NaN") != NULL);
    CHECK(!exists(dst));
    /* a zero sample */
    const char *zero = "1,2\n0,0\n";
    write_file(in, zero, strlen(zero));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, in, dst);
    CHECK(rc == 1 && strstr(out, "sample 1 has all 2 values zero") != NULL);
    CHECK(!exists(dst));
    /* more features than the qubits hold */
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --qubits 0 --out %s", qmesh, in, dst);
    CHECK(rc == 1 && strstr(out, "error[E-QUBITS]") != NULL);
    const char *wide = "1,2,3,4,5\n";
    write_file(in, wide, strlen(wide));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --qubits 2 --out %s", qmesh, in, dst);
    CHECK(rc == 1);
    CHECK(strstr(out, "error[E-INPUT]: request: 5 features exceed the state vector size 4 (2 qubits); use at least 3 qubits") != NULL);
    CHECK(!exists(dst));
    /* a state that does not fit the scenario: refused by the plan, before any allocation */
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --qubits 40 --scenario %s/scenarios/gh200.yaml --out %s",
             qmesh, in, srcdir, dst);
    CHECK(rc == 1);
    CHECK(strstr(out, "error[E-CAPACITY]: feasibility:") != NULL);
    CHECK(!exists(dst));
    /* a truncated .npy */
    snprintf(in, sizeof in, "%s/trunc.npy", tmpdir);
    char hdr[128] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f8', 'fortran_order': False, 'shape': (8,), }";
    size_t hl = strlen(hdr + 10) + 10;
    while (hl < 127)
        hdr[hl++] = ' ';
    hdr[127] = '\n';
    unsigned char buf[128 + 16];
    memcpy(buf, hdr, 128);
    memset(buf + 128, 0, 16);
    write_file(in, buf, sizeof buf);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, in, dst);
    CHECK(rc == 1);
    CHECK(strstr(out, "error[E-INPUT]") != NULL && strstr(out, "truncated: expected 64 data bytes, found 16") != NULL);
    CHECK(!exists(dst));
    /* a scenario the user names that cannot be read is an error, not a default */
    snprintf(in, sizeof in, "%s/ok.csv", tmpdir);
    write_file(in, "1,2\n", 4);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --scenario /nonexistent.yaml", qmesh, in);
    CHECK(rc == 1 && strstr(out, "error[E-IO]") != NULL && strstr(out, "/nonexistent.yaml") != NULL);
    /* the simulator's debug switch: a bad value is one line, nothing written; poisoning changes
     * no output byte (every slot is written by the encode) */
    const char *rows = "1,2,3\n-4,5,0.5\n1e-300,2e-300,0\n";
    write_file(in, rows, strlen(rows));
    rc = qm_test_runf(out, sizeof out, "QM_SIM_POISON=yes %s encode --input %s --out %s", qmesh, in,
                      dst);
    CHECK(rc == 1 && strstr(out, "error[E-ARG]: sim: QM_SIM_POISON must be 0 or 1 (got 'yes')\n"));
    CHECK(!exists(dst));
    char dst2[520];
    snprintf(dst2, sizeof dst2, "%s/out2.npy", tmpdir);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, in, dst);
    CHECK(rc == 0);
    rc = qm_test_runf(out, sizeof out, "QM_SIM_POISON=1 %s encode --input %s --out %s", qmesh, in,
                      dst2);
    CHECK(rc == 0);
    CHECK(qm_test_runf(out, sizeof out, "cmp %s %s", dst, dst2) == 0);
    remove(dst);
    remove(dst2);
    /* usage */
    rc = qm_test_runf(out, sizeof out, "%s encode --out x.npy", qmesh);
    CHECK(rc == 2 && strstr(out, "--input FILE is required") != NULL);
}

static void test_float32_npy(void)
{
    char out[8192], in[512], dst[512];
    snprintf(in, sizeof in, "%s/f32.npy", tmpdir);
    snprintf(dst, sizeof dst, "%s/f32-out.npy", tmpdir);
    char hdr[128];
    int k = snprintf(hdr, sizeof hdr, "\x93NUMPY\x01%c%c%c{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                     0, 118, 0);
    while (k < 127)
        hdr[k++] = ' ';
    hdr[127] = '\n';
    unsigned char buf[128 + 12];
    memcpy(buf, hdr, 128);
    const float v[3] = {3, 0, 4};
    memcpy(buf + 128, v, sizeof v);
    write_file(in, buf, sizeof buf);
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, in, dst);
    CHECK(rc == 0);
    uint64_t n = 0;
    float *a = read_npy(dst, "'descr': '<c8', 'fortran_order': False, 'shape': (4,)", &n, 4);
    CHECK(a != NULL && n == 4);
    if (a && n == 4)
        CHECK(a[0] == 0.6f && a[2] == 0.0f && a[4] == 0.8f && a[6] == 0.0f && a[7] == 0.0f);
    free(a);
}

/* Run a command line (stderr only captured): its exit code; *last = its last stderr line. */
static int run_err(char *out, size_t cap, const char **last, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1 >/dev/null", sizeof cmd - strlen(cmd) - 1);
    const int rc = qm_test_run(cmd, out, cap);
    const size_t n = strlen(out);
    const char *p = n > 1 ? out + n - 2 : out;
    while (p > out && p[-1] != '\n')
        --p;
    *last = p;
    return rc;
}

/* a(i) = 2^-n sum_x exp(i phi(x)) (-1)^popcount(x & i) of docs/encodings.md, directly in long
 * double (pairs: the values after the n linear ones, (0,1), (0,2) .. in order). */
static void iqp_reference(const double *d, unsigned q, bool pairs, uint64_t i, long double *re,
                          long double *im)
{
    long double r = 0, m = 0;
    for (uint64_t x = 0; x < ((uint64_t)1 << q); ++x) {
        long double phi = 0;
        unsigned p = q;
        for (unsigned k = 0; k < q; ++k)
            phi += (x >> k) & 1 ? (long double)d[k] : 0;
        for (unsigned k = 0; pairs && k < q; ++k)
            for (unsigned l = k + 1; l < q; ++l, ++p)
                phi += ((x >> k) & 1) && ((x >> l) & 1) ? (long double)d[p] : 0;
        const long double sgn = __builtin_popcountll(x & i) & 1 ? -1 : 1;
        r += sgn * cosl(phi);
        m += sgn * sinl(phi);
    }
    *re = ldexpl(r, -(int)q);
    *im = ldexpl(m, -(int)q);
}

/* iqp and iqp-z from the command line: the .npy against the definition (within (2n + 4) 2^-53,
 * docs/encodings.md), one 12-qubit state cut over the built-in mesh's 4 devices (its transform
 * exchanges between them), and the error lines of a value count that fits no iqp state. */
static void test_iqp_cli(const char *angles)
{
    char out[8192], dst[512], in[512];
    snprintf(dst, sizeof dst, "%s/iqp-out.npy", tmpdir);
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --encoding iqp --out %s", qmesh,
                          angles, dst);
    CHECK(rc == 0);
    uint64_t n = 0;
    double *a = read_npy(dst, "'descr': '<c16', 'fortran_order': False, 'shape': (2, 4)", &n, 8);
    CHECK(a != NULL && n == 8);
    const double x[2][3] = {{0.1, 0.2, 0.3}, {1, 2, 3}};
    for (int smp = 0; a && n == 8 && smp < 2; ++smp)
        for (int i = 0; i < 4; ++i) {
            long double r, m;
            iqp_reference(x[smp], 2, true, (uint64_t)i, &r, &m);
            CHECK(fabsl(a[2 * (4 * smp + i)] - r) <= 8 * 0x1p-53 &&
                  fabsl(a[2 * (4 * smp + i) + 1] - m) <= 8 * 0x1p-53);
        }
    free(a);
    /* one state of 12 qubits (iqp-z: 12 values) over the 4 devices of the built-in mesh */
    snprintf(in, sizeof in, "%s/iqpz.csv", tmpdir);
    double d[12];
    char line[512];
    size_t len = 0;
    for (int k = 0; k < 12; ++k) {
        d[k] = 0.25 * (k + 1) - 1.5;
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%.17g", k ? "," : "", d[k]);
    }
    line[len++] = '\n';
    write_file(in, line, len);
    snprintf(dst, sizeof dst, "%s/iqpz-out.npy", tmpdir);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --encoding iqp-z --policy equal "
                      "--out %s", qmesh, in, dst);
    CHECK(rc == 0 && strstr(out, "cut into 4 pages") != NULL);
    a = read_npy(dst, "'descr': '<c16', 'fortran_order': False, 'shape': (1, 4096)", &n, 8);
    CHECK(a != NULL && n == 4096);
    double worst = 0;
    for (uint64_t i = 0; a && n == 4096 && i < 4096; i += 7) { /* every 7th: the sum is O(N) */
        long double r, m;
        iqp_reference(d, 12, false, i, &r, &m);
        const double e = (double)fmaxl(fabsl(a[2 * i] - r), fabsl(a[2 * i + 1] - m));
        worst = e > worst ? e : worst;
    }
    CHECK(worst <= 28 * 0x1p-53);
    free(a);
    const char *last;
    write_file(in, "0.1,0.2,0.3,0.4\n", 16);
    rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding iqp", qmesh, in);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: encode: 4 values per sample make no iqp state (n qubits "
                    "take n + n(n-1)/2 values: 3 for 2, 6 for 3)\n");
    {
        /* one value per qubit: 70 values would be 70 qubits */
        char wide[70 * 2 + 1];
        for (int k = 0; k < 70; ++k) {
            wide[2 * k] = '1';
            wide[2 * k + 1] = k + 1 < 70 ? ',' : '\n';
        }
        write_file(in, wide, sizeof wide - 1);
        rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding angle", qmesh, in);
        CHECK(rc == 1);
        CHECK_STR(last, "error[E-QUBITS]: encode: the angle encoding takes one value per qubit: 70 "
                        "values per sample would make 70 qubits; at most 63\n");
        write_file(in, "0.1,0.2,0.3,0.4\n", 16);
    }
    /* the planner's check names the counts around a count that fits no iqp state */
    rc = run_err(out, sizeof out, &last, "%s plan --encoding iqp --qubits 4 --features 14", qmesh);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: request: the iqp encoding of 4 qubits takes 10 values per "
                    "sample, got 14; no qubit count takes 14 values (n qubits take n + n(n-1)/2 "
                    "values: 10 for 4, 15 for 5)\n");
    rc = run_err(out, sizeof out, &last, "%s plan --encoding basis --qubits 3 --features 2", qmesh);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: request: the basis encoding of 3 qubits takes 1 value per "
                    "sample, got 2; basis takes one index per sample\n");
    rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding iqp --qubits 3", qmesh,
                 angles);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: request: the iqp encoding of 3 qubits takes 6 values per "
                    "sample, got 3; 3 values make 2 qubits\n");
}

/* The product-state encodings from the command line: CSV in, the .npy shape and amplitudes out
 * (against cos/sin here), basis from a 1-D column of indices, and the error lines. */
static void test_featuremaps(void)
{
    char out[8192], in[512], dst[512];
    snprintf(in, sizeof in, "%s/angles.csv", tmpdir);
    snprintf(dst, sizeof dst, "%s/angles-out.npy", tmpdir);
    write_file(in, "0.1,0.2,0.3\n1,2,3\n", 18);
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --encoding angle --out %s", qmesh,
                          in, dst);
    CHECK(rc == 0);
    uint64_t n = 0;
    double *a = read_npy(dst, "'descr': '<c16', 'fortran_order': False, 'shape': (2, 8)", &n, 8);
    CHECK(a != NULL && n == 16);
    const double x[2][3] = {{0.1, 0.2, 0.3}, {1, 2, 3}};
    for (int smp = 0; a && n == 16 && smp < 2; ++smp)
        for (int i = 0; i < 8; ++i) {
            long double r = 1;
            for (int k = 0; k < 3; ++k)
                r *= (i >> k) & 1 ? sinl(x[smp][k]) : cosl(x[smp][k]);
            CHECK(fabsl(a[2 * (8 * smp + i)] - r) <= 1e-15L && a[2 * (8 * smp + i) + 1] == 0.0);
        }
    free(a);
    snprintf(in, sizeof in, "%s/basis.csv", tmpdir);
    snprintf(dst, sizeof dst, "%s/basis-out.npy", tmpdir);
    write_file(in, "0\n5\n3\n", 6);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --encoding basis --out %s", qmesh, in,
                      dst);
    CHECK(rc == 0);
    a = read_npy(dst, "'descr': '<c16', 'fortran_order': False, 'shape': (3, 8)", &n, 8);
    CHECK(a != NULL && n == 24);
    const int j[3] = {0, 5, 3};
    for (int smp = 0; a && n == 24 && smp < 3; ++smp)
        for (int i = 0; i < 8; ++i)
            CHECK(a[2 * (8 * smp + i)] == (i == j[smp] ? 1.0 : 0.0));
    free(a);
    write_file(in, "0\n2.5\n", 6);
    const char *last;
    rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding basis", qmesh, in);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: encode: sample 1: basis index 2.5 is not a non-negative "
                    "integer\n");
    rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding basis --qubits 1", qmesh,
                 in);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: encode: sample 1: basis index 2.5 is not an integer in [0, 2) "
                    "(1 qubits)\n");
    snprintf(in, sizeof in, "%s/angles.csv", tmpdir);
    rc = run_err(out, sizeof out, &last, "%s encode --input %s --encoding angle --qubits 4", qmesh,
                 in);
    CHECK(rc == 1);
    CHECK_STR(last, "error[E-INPUT]: request: the angle encoding of 4 qubits takes 4 values per "
                    "sample, got 3; 3 values make 3 qubits\n");
    test_iqp_cli(in);
}

/* A digits-shaped data set: 1797 rows of 64 integer "pixels" in 0..16 and a label 0..9, as
 * gzip-compressed CSV without a header, from a fixed linear congruential sequence (the same bytes on
 * every machine). Every row has at least one nonzero pixel. */
static bool make_digits(const char *path)
{
    gzFile gz = gzopen(path, "wb");
    if (!gz)
        return false;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    bool ok = true;
    for (int row = 0; row < 1797 && ok; ++row) {
        char line[512];
        size_t len = 0;
        for (int j = 0; j < 64; ++j) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int v = (int)((x >> 33) % 17);
            if (j == 27 && v == 0)
                v = 1 + row % 16;
            len += (size_t)snprintf(line + len, sizeof line - len, "%d,", v);
        }
        len += (size_t)snprintf(line + len, sizeof line - len, "%d\n", row % 10);
        ok = gzwrite(gz, line, (unsigned)len) == (int)len;
    }
    return gzclose(gz) == Z_OK && ok;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_encode_cli QMESH SRCDIR\n");
        return 2;
    }
    qmesh = argv[1];
    srcdir = argv[2];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qmesh-test-encode-%d", (int)getpid());
    mkdir(tmpdir, 0700);
    char digits[512];
    snprintf(digits, sizeof digits, "%s/digits.csv.gz", tmpdir);
    test_errors();
    test_float32_npy();
    test_featuremaps();
    CHECK(make_digits(digits));
    test_digits(digits);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return qm_test_end("test_encode_cli");
}
