/* test_plan_sizes.c — `qmesh plan` at the edge of 64-bit sizes (issue 13 item 14): states of 2^63
 * bytes and more print exact JSON integers below 2^63 and the nearest double from 2^63 on (never a
 * wrapped negative count), the headroom is exact down to -2^63, the table prints signed
 * magnitudes, and requests whose byte count overflows 64 bits are refused with E-QUBITS naming
 * the cap derived from the dtype (complex64: 60 qubits, complex128: 59). Run under UBSan by the
 * sanitizer build: no signed overflow anywhere on these paths.
 * Arguments: the qmesh binary, the source dir. */
#define _POSIX_C_SOURCE 200809L
#include "testlib.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static const char *qmesh, *srcdir;

static int run(char *out, size_t cap, const char *args, bool want_stderr)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s plan --scenario %s/scenarios/%s %s", qmesh, srcdir, args,
             want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    return qm_test_run(cmd, out, cap);
}

static bool is_real(json_t *o, const char *key, double want)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_real(v) || json_real_value(v) != want) {
        fprintf(stderr, "%s: want the real %a, got %s %a / %lld\n", key, want,
                json_is_real(v) ? "real" : json_is_integer(v) ? "integer" : "other",
                json_real_value(v), (long long)json_integer_value(v));
        return false;
    }
    return true;
}

static bool is_int(json_t *o, const char *key, json_int_t want)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) != want) {
        fprintf(stderr, "%s: want the integer %lld, got %s %lld\n", key, (long long)want,
                json_is_integer(v) ? "integer" : "other", (long long)json_integer_value(v));
        return false;
    }
    return true;
}

/* gh200.yaml: one GH200, 96 GiB of HBM of which 94926258176 B are usable. */
#define GH200_USABLE 94926258176ll
#define STAGING (64ll << 20)

/* --qubits q --dtype dt --json: infeasible (exit 1), with the counts of a state of `bytes`. */
static void check_state(unsigned q, const char *dt, uint64_t bytes)
{
    static char out[1 << 16];
    char args[256];
    snprintf(args, sizeof args, "gh200.yaml --qubits %u --dtype %s --json", q, dt);
    const int rc = run(out, sizeof out, args, false);
    CHECK(rc == 1);
    json_error_t err;
    json_t *o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (!o) {
        fprintf(stderr, "%s: not JSON (%s):\n%s\n", args, err.text, out);
        return;
    }
    const bool big = bytes > (uint64_t)INT64_MAX;
    CHECK(json_is_false(json_object_get(o, "feasible")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(o, "error"), "code")), "E-CAPACITY");
    CHECK(is_int(o, "global_amplitudes", (json_int_t)1 << q));
    CHECK(big ? is_real(o, "state_bytes", (double)bytes) : is_int(o, "state_bytes", (json_int_t)bytes));
    json_t *s0 = json_array_get(json_object_get(o, "shards"), 0);
    CHECK(big ? is_real(s0, "bytes", (double)bytes) : is_int(s0, "bytes", (json_int_t)bytes));
    CHECK(is_int(s0, "start", 0) && is_int(s0, "end", (json_int_t)1 << q));
    json_t *d0 = json_array_get(json_object_get(o, "devices"), 0);
    CHECK(is_int(d0, "usable_bytes", GH200_USABLE));
    CHECK(is_int(d0, "staging_bytes", STAGING));
    const uint64_t planned = bytes + STAGING;
    CHECK(big ? is_real(d0, "planned_bytes", (double)planned)
              : is_int(d0, "planned_bytes", (json_int_t)planned));
    CHECK(big ? is_real(d0, "shard_bytes", (double)bytes) : is_int(d0, "shard_bytes", (json_int_t)bytes));
    /* usable - planned: exact, negative, above -2^63 in every case here */
    CHECK(is_int(d0, "headroom_bytes", -(json_int_t)(planned - (uint64_t)GH200_USABLE)));
    json_decref(o);
    /* the same as a table: the sizes, and a negative headroom */
    snprintf(args, sizeof args, "gh200.yaml --qubits %u --dtype %s", q, dt);
    CHECK(run(out, sizeof out, args, false) == 1);
    char want[128];
    snprintf(want, sizeof want, "%llu amplitudes, %s", (unsigned long long)1 << q,
             bytes == (uint64_t)1 << 63 ? "8.00 EiB" : "4.00 EiB");
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof want, "88.41 GiB     %s    64.00 MiB    -%s",
             bytes == (uint64_t)1 << 63 ? "8.00 EiB" : "4.00 EiB",
             bytes == (uint64_t)1 << 63 ? "8.00 EiB" : "4.00 EiB");
    if (!strstr(out, want))
        fprintf(stderr, "want '%s' in:\n%s\n", want, out);
    CHECK(strstr(out, want) != NULL);
}

static void test_refused(void)
{
    static const struct {
        unsigned q;
        const char *dt;
        unsigned cap;
    } cases[] = {{61, "complex64", 60},  {62, "complex64", 60},  {63, "complex64", 60},
                 {64, "complex64", 60},  {60, "complex128", 59}, {61, "complex128", 59},
                 {62, "complex128", 59}, {63, "complex128", 59}, {64, "complex128", 59}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        char args[256], out[1024], want[512];
        snprintf(args, sizeof args, "gh200.yaml --qubits %u --dtype %s --json", cases[i].q,
                 cases[i].dt);
        const int rc = run(out, sizeof out, args, true);
        snprintf(want, sizeof want, "error[E-QUBITS]: request: %u qubits of %s overflow 64-bit "
                 "byte counts (2^%u amplitudes x %d B); at most %u qubits\n", cases[i].q,
                 cases[i].dt, cases[i].q, strcmp(cases[i].dt, "complex64") == 0 ? 8 : 16,
                 cases[i].cap);
        CHECK(rc == 1);
        if (strcmp(out, want) != 0)
            fprintf(stderr, "%s:\n got: %s want: %s", args, out, want);
        CHECK_STR(out, want);
    }
    /* a batch lowers the cap: 2^4 states of complex64 */
    char out[1024];
    CHECK(run(out, sizeof out, "gh200.yaml --qubits 57 --batch 16 --json", true) == 1);
    CHECK_STR(out, "error[E-QUBITS]: request: 57 qubits of complex64 in this batch overflow 64-bit "
                   "byte counts (2^57 amplitudes x 8 B); at most 56 qubits\n");
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    qmesh = argv[1];
    srcdir = argv[2];
    check_state(60, "complex64", (uint64_t)1 << 63);  /* the case: 8 EiB */
    check_state(59, "complex128", (uint64_t)1 << 63); /* 8 EiB */
    check_state(59, "complex64", (uint64_t)1 << 62);  /* 4 EiB: still integers */
    test_refused();
    return qm_test_end("test_plan_sizes");
}
