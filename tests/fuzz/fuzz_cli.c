/* fuzz_cli.c — libFuzzer harness for the `qmesh` command line (engine/cli.c and cli_*.c).
 *
 * Choice: the CLI has no parse-only entry point, so this drives the real one. engine/cli.c is
 * compiled into this harness with -Dmain=qm_fuzz_cli_main (tests/fuzz/CMakeLists.txt), so every
 * subcommand (encode, plan, scenario, topo, devices, help, version) runs as `qmesh` would, parsing
 * included, on the simulated backend (the fuzz build has no CUDA).
 * Input: arguments separated by '\n' or NUL (argv[0] is "qmesh"), at most 24 arguments of at most
 * 200 bytes each; longer inputs are ignored.
 * Sandbox: each input runs with the working directory set to the per-process scratch directory
 * (fuzz_common.h), which is emptied and refilled with fixtures before every input: s.yaml (the
 * built-in scenario), bad.yaml (an invalid one), a.npy (2 x 4 float64), a.csv, a.csv.gz and an
 * empty directory d. Inputs with an argument that contains '/', or is "." or "..", or is "-" (stdin)
 * are skipped, so no file outside the scratch directory can be read or written and stdin is never
 * read. `encode` materializes real states: there, `--qubits` and `--ranks` values other than 0-20
 * and `--chunk-bytes` are skipped to keep each run small (2^20 amplitudes per sample); `whatif`
 * builds a mesh per variant: `--hosts` and `--devices-per-host` lists of more than 8 values or
 * values above 64 are skipped. Both `--name value` and `--name=value` are looked at. No command
 * calls exit().
 * stdout goes to /dev/null; run with -close_fd_mask=2 to silence the error lines too.
 * Oracles: ASan/UBSan, leaks, and the exit code being 0, 1 or 2.
 */
#include "fuzz_common.h"
#include "scenario_loader.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int qm_fuzz_cli_main(int argc, char **argv); /* engine/cli.c's main, renamed */

#define MAX_ARGS 24
#define MAX_ARG_BYTES 200

static const char csv_text[] = "x,y,z,label\n1,2,3,a\n4,5,6,b\n0.5,-1,2e3,c\n";
static const char bad_yaml[] = "schema: qmesh/1\nhosts:\n  - id: h0\n    devices: [ {id: g0} ]\n";
static unsigned char npy_bytes[128 + 8 * 8];
static size_t npy_n;
static unsigned char gz_bytes[256];
static size_t gz_n;
static int home_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* a.npy: NumPy 1.0, '<f8', shape (2, 4), data at byte 128 */
    static const char hdr[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4), }";
    memset(npy_bytes, ' ', 128);
    memcpy(npy_bytes, "\x93NUMPY\x01\x00", 8);
    npy_bytes[8] = 128 - 10;
    npy_bytes[9] = 0;
    memcpy(npy_bytes + 10, hdr, sizeof hdr - 1);
    npy_bytes[127] = '\n';
    for (int i = 0; i < 8; ++i) {
        const double v = 0.25 * (i + 1);
        memcpy(npy_bytes + 128 + 8 * i, &v, 8);
    }
    npy_n = 128 + 64;
    /* a.csv.gz */
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    z.next_in = (Bytef *)(uintptr_t)csv_text;
    z.avail_in = sizeof csv_text - 1;
    z.next_out = gz_bytes;
    z.avail_out = sizeof gz_bytes;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    gz_n = z.total_out;
    deflateEnd(&z);
    /* stdout to /dev/null: tables and JSON are not checked here */
    fflush(stdout);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0 || dup2(devnull, 1) < 0)
        abort();
    close(devnull);
    home_fd = open(".", O_RDONLY | O_DIRECTORY);
    if (home_fd < 0)
        abort();
    (void)qm_fuzz_dir();
    return 0;
}

static void fixtures(void)
{
    char p[4200];
    const char *y = qm_default_scenario_text();
    qm_fuzz_dir_clear();
    qm_fuzz_write("s.yaml", y, strlen(y), p, sizeof p);
    qm_fuzz_write("bad.yaml", bad_yaml, sizeof bad_yaml - 1, p, sizeof p);
    qm_fuzz_write("a.npy", npy_bytes, npy_n, p, sizeof p);
    qm_fuzz_write("a.csv", csv_text, sizeof csv_text - 1, p, sizeof p);
    qm_fuzz_write("a.csv.gz", gz_bytes, gz_n, p, sizeof p);
    snprintf(p, sizeof p, "%s/d", qm_fuzz_dir());
    if (mkdir(p, 0700) != 0)
        abort();
}

/* Whether v[0..n) is a number 0..max (digits only). */
static int small_number(const char *v, size_t n, int max)
{
    if (n < 1 || n > 3)
        return 0;
    for (size_t k = 0; k < n; ++k)
        if (v[k] < '0' || v[k] > '9')
            return 0;
    return atoi(v) <= max;
}

/* Whether a comma-separated list has at most 8 numbers, each 0..max. */
static int small_list(const char *v, int max)
{
    for (int items = 0;; ++items) {
        const char *c = strchr(v, ',');
        const size_t n = c ? (size_t)(c - v) : strlen(v);
        if (items >= 8 || !small_number(v, n, max))
            return 0;
        if (!c)
            return 1;
        v = c + 1;
    }
}

/* 1 when the argument list may run (see the header comment). Flags are looked at in both forms,
 * `--name value` and `--name=value`. */
static int allowed(int argc, char **argv)
{
    const int encode = argc > 1 && strcmp(argv[1], "encode") == 0;
    const int whatif = argc > 1 && strcmp(argv[1], "whatif") == 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strchr(a, '/') || strcmp(a, "-") == 0 || strcmp(a, ".") == 0 || strcmp(a, "..") == 0)
            return 0;
        char name[32];
        const char *eq = strchr(a, '=');
        const size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            continue;
        memcpy(name, a, nl);
        name[nl] = '\0';
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        if (encode && strcmp(name, "--chunk-bytes") == 0)
            return 0;
        if (encode && (strcmp(name, "--qubits") == 0 || strcmp(name, "--ranks") == 0) && v &&
            !small_number(v, strlen(v), 20))
            return 0;
        /* whatif builds every variant's mesh: a few small clusters only */
        if (whatif && (strcmp(name, "--hosts") == 0 || strcmp(name, "--devices-per-host") == 0) &&
            v && !small_list(v, 64))
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_ARGS * (MAX_ARG_BYTES + 1))
        return 0;
    char *copy = malloc(size + 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "qmesh";
    char *s = copy, *end = copy + size;
    int ok = 1;
    while (s < end) {
        char *e = s;
        while (e < end && *e != '\n' && *e != '\0')
            ++e;
        *e = '\0';
        if (argc > MAX_ARGS || e - s > MAX_ARG_BYTES) {
            ok = 0;
            break;
        }
        argv[argc++] = s;
        s = e + 1;
    }
    argv[argc] = NULL;
    if (ok && allowed(argc, argv)) {
        fixtures();
        if (chdir(qm_fuzz_dir()) != 0)
            abort();
        const int rc = qm_fuzz_cli_main(argc, argv);
        fflush(stdout);
        fflush(stderr);
        if (fchdir(home_fd) != 0)
            abort();
        if (rc < 0 || rc > 2) {
            fprintf(stderr, "fuzz_cli: exit code %d (expected 0, 1 or 2)\n", rc);
            abort();
        }
    }
    free(copy);
    return 0;
}
