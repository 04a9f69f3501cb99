/* test_plan_cli.c — `qmesh plan` from the command line: the plan's JSON object (docs/cli.md), the
 * tracker's acceptance cases, and every bad request as a one-line error with its code.
 * Arguments: the qmesh binary, the source dir. */
#define _POSIX_C_SOURCE 200809L
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *qmesh, *srcdir;

static int run(char *out, size_t cap, const char *args, int want_stderr)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s plan --scenario %s/scenarios/%s %s", qmesh, srcdir, args,
             want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    return qm_test_run(cmd, out, cap);
}

static void test_json(void)
{
    static char out[1 << 20];
    int rc = run(out, sizeof out, "hgx-h200.yaml --qubits 36 --json", 0);
    CHECK(rc == 0);
    json_error_t err;
    json_t *o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (!o)
        return;
    CHECK(json_is_true(json_object_get(o, "feasible")));
    CHECK(json_is_null(json_object_get(o, "error")));
    CHECK(json_integer_value(json_object_get(o, "global_amplitudes")) == (json_int_t)1 << 36);
    CHECK(json_integer_value(json_object_get(o, "state_bytes")) == (json_int_t)1 << 39);
    CHECK(json_integer_value(json_object_get(o, "pages")) == 8);
    json_t *req = json_object_get(o, "request");
    CHECK(json_integer_value(json_object_get(req, "qubits")) == 36);
    CHECK_STR(json_string_value(json_object_get(req, "dtype")), "complex64");
    CHECK_STR(json_string_value(json_object_get(req, "policy")), "auto");
    CHECK(json_integer_value(json_object_get(req, "batch")) == 1);
    json_t *shards = json_object_get(o, "shards");
    CHECK(json_array_size(shards) == 8);
    for (size_t i = 0; i < json_array_size(shards); ++i) {
        json_t *s = json_array_get(shards, i);
        char id[32];
        snprintf(id, sizeof id, "n0.g%zu", i);
        CHECK_STR(json_string_value(json_object_get(s, "device")), id);
        CHECK(json_integer_value(json_object_get(s, "start")) == (json_int_t)i << 33);
        CHECK(json_integer_value(json_object_get(s, "end")) == (json_int_t)(i + 1) << 33);
        CHECK(json_integer_value(json_object_get(s, "bytes")) == (json_int_t)64 << 30);
        CHECK(json_integer_value(json_object_get(s, "rank")) == 0);
    }
    json_t *d0 = json_array_get(json_object_get(o, "devices"), 0);
    /* 143771 MiB - 1 GiB reserve; planned = 64 GiB + 64 MiB staging */
    CHECK(json_integer_value(json_object_get(d0, "usable_bytes")) == (json_int_t)(143771 - 1024) << 20);
    CHECK(json_integer_value(json_object_get(d0, "planned_bytes")) == ((json_int_t)64 << 30) + (64 << 20));
    CHECK(json_integer_value(json_object_get(d0, "headroom_bytes")) ==
          ((json_int_t)(143771 - 1024) << 20) - ((json_int_t)64 << 30) - (64 << 20));
    json_t *g = json_object_get(o, "gather");
    CHECK(json_is_false(json_object_get(g, "feasible")));
    CHECK_STR(json_string_value(json_object_get(g, "target")), "n0.g0");
    json_t *mq = json_object_get(o, "max_qubits");
    CHECK(json_integer_value(json_object_get(mq, "complex64")) == 37);
    CHECK(json_integer_value(json_object_get(mq, "complex128")) == 36);
    json_t *e = json_object_get(o, "estimates_s");
    static const char *const phases[5] = {"ingest", "local_norm", "norm_allreduce", "encode", "gather"};
    for (int k = 0; k < 5; ++k)
        CHECK(json_is_real(json_object_get(e, phases[k])));
    /* 8-byte all-reduce on 8 NVLink GPUs: NCCL's 6.6 + 14 x 0.6 us */
    CHECK(fabs(json_real_value(json_object_get(e, "norm_allreduce")) - 15.0e-6) < 0.05e-6);
    json_decref(o);

    /* an infeasible request still prints the object, with feasible false and the error, exit 1 */
    rc = run(out, sizeof out, "hgx-h200.yaml --qubits 37 --dtype complex128 --json", 0);
    CHECK(rc == 1);
    o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (o) {
        CHECK(json_is_false(json_object_get(o, "feasible")));
        json_t *er = json_object_get(o, "error");
        CHECK_STR(json_string_value(json_object_get(er, "code")), "E-CAPACITY");
        CHECK(strstr(json_string_value(json_object_get(er, "message")), "needs 256.00 GiB") != NULL);
        CHECK(strstr(json_string_value(json_object_get(er, "message")),
                     "largest state that fits is 36 qubits (complex128)") != NULL);
        json_decref(o);
    }
}

static void test_bad_requests(void)
{
    static const struct {
        const char *args, *line;
    } cases[] = {
        {"six-gpu.yaml --qubits 0", "error[E-QUBITS]: request: qubits must be at least 1 (got 0)\n"},
        {"six-gpu.yaml --qubits 64", "error[E-QUBITS]: request: 64 qubits of complex64 overflow 64-bit byte counts (2^64 amplitudes x 8 B); at most 60 qubits\n"},
        {"six-gpu.yaml --qubits 10 --dtype complex32", "error[E-DTYPE]: plan: --dtype must be complex64 or complex128 (got 'complex32')\n"},
        {"six-gpu.yaml --qubits 10 --policy foo", "error[E-POLICY]: plan: unknown policy 'foo'; use one of auto, single, equal, weighted, balanced, replicated\n"},
        {"six-gpu.yaml --qubits 10 --batch 0", "error[E-ARG]: request: batch must be at least 1 (got 0)\n"},
        {"six-gpu.yaml --qubits 3 --features 9", "error[E-INPUT]: request: 9 features exceed the state vector size 8 (3 qubits); use at least 4 qubits\n"},
        {"six-gpu.yaml --qubits 10 --gather n9.g9", "error[E-NO-GATHER]: gather: target 'n9.g9' is not a device of this mesh (6 devices, first 'n0.g0'); use auto, host, none or a device id\n"},
        {"six-gpu.yaml --qubits 10 --ranks 5", "error[E-RANK]: request: 5 ranks requested but the scenario has 1\n"},
        /* the hint names what works: weighted fits 35 qubits; nothing fits 36 (auto's frontier) */
        {"six-gpu.yaml --qubits 35 --policy equal", "error[E-NOT-POW2]: plan: equal needs a power-of-two device count, but the mesh has 6 devices; use --policy weighted\n"},
        {"six-gpu.yaml --qubits 36 --policy equal", "error[E-NOT-POW2]: plan: equal needs a power-of-two device count, but the mesh has 6 devices; largest state that fits is 35 qubits (complex64) with --policy auto\n"},
        {"six-gpu.yaml --qubits 34 --gather n0.g1", "error[E-NO-GATHER]: plan: gather to n0.g1: 96.00 GiB beyond its own shard exceeds 41.44 GiB free on n0.g1; use --gather none\n"},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        int rc = run(out, sizeof out, cases[i].args, 1);
        CHECK(rc == 1);
        if (strcmp(out, cases[i].line) != 0)
            fprintf(stderr, "args: %s\n got: %s want: %s", cases[i].args, out, cases[i].line);
        CHECK_STR(out, cases[i].line); /* exactly one line, exactly this text */
    }
    /* six GPUs: auto finds a layout where equal cannot */
    int rc = run(out, sizeof out, "six-gpu.yaml --qubits 35", 0);
    CHECK(rc == 0 && strstr(out, "feasible: yes") != NULL && strstr(out, "(used: weighted)") != NULL);
    /* usage errors exit 2 */
    rc = run(out, sizeof out, "six-gpu.yaml", 1);
    CHECK_STR(out, "error[E-ARG]: plan: --qubits N is required (or --input FILE to take it from "
                   "the data, or --max for the largest that fits); run 'qmesh plan --help'\n");
    CHECK(rc == 2);
}

/* `qmesh plan --max` on 3 of the 4 JUWELS nodes (12 x A100 40GB, 42405855232 B - 1 GiB reserve =
 * 41332113408 B = 38.49 GiB usable each, 461.9 GiB in all): the 2 -> 3 node what-if of issue 18. */
static void test_max(void)
{
    static char out[1 << 16];
    /* 2^35 x 8 B = 256 GiB fits, 512 GiB does not; complex128 one less. single cannot serve 3
     * ranks, equal 12 devices; replicated holds the state on every device: 2^32 x 8 = 32 GiB */
    int rc = run(out, sizeof out, "a100-4node-hdr.yaml --ranks 3 --max", 0);
    CHECK(rc == 0);
    const char *rest = strchr(out, '\n');
    char title[1024];
    snprintf(title, sizeof title, "scenario: a100-4node-hdr (%s/scenarios/a100-4node-hdr.yaml), "
             "3 ranks, 12 devices\n", srcdir);
    CHECK(rest && strncmp(out, title, (size_t)(rest + 1 - out)) == 0 &&
          strlen(title) == (size_t)(rest + 1 - out));
    CHECK_STR(rest ? rest + 1 : "", "largest state that fits, in qubits:\n"
                   "policy                    complex64             complex128\n"
                   "auto                  35 (weighted)          34 (weighted)\n"
                   "single                            -                      -\n"
                   "equal                             -                      -\n"
                   "weighted                         35                     34\n"
                   "balanced                         35                     34\n"
                   "replicated                       32                     31\n");
    /* 1e6 features = 20 qubits: complex64 8 MiB a sample, (41332113408 - 64 MiB staging) / 8 MiB
     * = 4919 per device, x 12 = 59028; complex128 16 MiB: 2459, x 12 = 29508 */
    rc = run(out, sizeof out, "a100-4node-hdr.yaml --ranks 3 --max --features 1000000 --json", 0);
    CHECK(rc == 0);
    json_error_t err;
    json_t *o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (o) {
        /* the plan object: ok, command, error, the plan's members null, the answer in max */
        CHECK(json_is_true(json_object_get(o, "ok")));
        CHECK_STR(json_string_value(json_object_get(o, "command")), "plan");
        CHECK(json_is_null(json_object_get(o, "error")));
        CHECK(json_is_null(json_object_get(o, "request")));
        CHECK(json_is_null(json_object_get(o, "feasible")));
        CHECK(json_is_null(json_object_get(o, "plan_hash")));
        json_t *max = json_object_get(o, "max");
        CHECK_STR(json_string_value(json_object_get(max, "unit")), "samples");
        CHECK(json_integer_value(json_object_get(max, "ranks")) == 3);
        CHECK(json_integer_value(json_object_get(max, "devices")) == 12);
        CHECK(json_integer_value(json_object_get(max, "features")) == 1000000);
        CHECK(json_integer_value(json_object_get(max, "qubits")) == 20);
        json_t *c64 = json_object_get(max, "complex64");
        json_t *c128 = json_object_get(max, "complex128");
        CHECK(json_integer_value(json_object_get(c64, "auto")) == 59028);
        CHECK(json_integer_value(json_object_get(c64, "weighted")) == 59028);
        CHECK(json_integer_value(json_object_get(c64, "replicated")) == 4919);
        CHECK(json_is_null(json_object_get(c64, "single")));
        CHECK_STR(json_string_value(json_object_get(c64, "auto_policy")), "equal");
        CHECK(json_integer_value(json_object_get(c128, "auto")) == 29508);
        CHECK(json_integer_value(json_object_get(c128, "balanced")) == 29508);
        json_decref(o);
    }
    rc = run(out, sizeof out, "a100-4node-hdr.yaml --ranks 3 --max --json", 0);
    o = json_loads(out, 0, &err);
    CHECK(rc == 0 && o != NULL);
    if (o) {
        json_t *max = json_object_get(o, "max");
        CHECK_STR(json_string_value(json_object_get(max, "unit")), "qubits");
        CHECK(json_is_null(json_object_get(max, "features")));
        json_t *c128 = json_object_get(max, "complex128");
        CHECK(json_integer_value(json_object_get(c128, "auto")) == 34);
        CHECK(json_is_null(json_object_get(c128, "equal")));
        CHECK_STR(json_string_value(json_object_get(c128, "auto_policy")), "weighted");
        json_decref(o);
    }
    /* the same 3 nodes planned with defaults: auto now plans them (it once stopped with E-POLICY) */
    rc = run(out, sizeof out, "a100-4node-hdr.yaml --ranks 3 --qubits 35", 0);
    CHECK(rc == 0 && strstr(out, "feasible: yes") && strstr(out, "(used: weighted)"));
    static const struct {
        const char *args, *line;
        int rc;
    } errs[] = {
        {"a100-4node-hdr.yaml --max --qubits 30", "error[E-ARG]: plan: --max and --qubits cannot be combined: --max finds the largest qubit count (or, with --features, batch) that fits; run 'qmesh plan --help'\n", 2},
        {"a100-4node-hdr.yaml --max --policy equal", "error[E-ARG]: plan: --max reports every dtype and policy and takes only --scenario, --ranks, --features, --backend and --json (got --policy); run 'qmesh plan --help'\n", 2},
        {"a100-4node-hdr.yaml --max --ranks 5", "error[E-RANK]: request: 5 ranks requested but the scenario has 4\n", 1},
        /* capacity errors name the largest request of the same shape that fits */
        {"a100-4node-hdr.yaml --ranks 3 --qubits 20 --features 1000000 --batch 60000", "error[E-CAPACITY]: feasibility: shard 0 needs 39.06 GiB (+ 64.00 MiB staging) on n0.g0 but 38.49 GiB is usable; largest batch that fits is 59028 (1000000 features, complex64)\n", 1},
        {"a100-4node-hdr.yaml --ranks 3 --qubits 36", "error[E-CAPACITY]: feasibility: shard 0 needs 42.67 GiB (+ 64.00 MiB staging) on n0.g0 but 38.49 GiB is usable; largest state that fits is 35 qubits (complex64)\n", 1},
        /* the case: equal and single cannot serve 3 ranks; the hint names weighted */
        {"a100-4node-hdr.yaml --ranks 3 --qubits 30 --policy single", "error[E-POLICY]: plan: single places the whole state on one device but 3 ranks were requested; use --policy weighted\n", 1},
        {"a100-4node-hdr.yaml --ranks 3 --qubits 30 --policy equal", "error[E-NOT-POW2]: plan: equal needs a power-of-two device count, but the mesh has 12 devices; use --policy weighted\n", 1},
    };
    for (size_t i = 0; i < sizeof errs / sizeof *errs; ++i) {
        rc = run(out, sizeof out, errs[i].args, 1);
        if (rc != errs[i].rc || strcmp(out, errs[i].line) != 0)
            fprintf(stderr, "args: %s\n got (%d): %s want: %s", errs[i].args, rc, out, errs[i].line);
        CHECK(rc == errs[i].rc);
        CHECK_STR(out, errs[i].line);
    }
}

/* `qmesh devices` without a GPU lists the built-in default scenario's mesh: the ids, type names
 * and capacities that `plan` and `topo show` use (it once listed a mesh of its own, sim.g0-3 with
 * no reserve). */
static void test_devices(void)
{
    char out[4096], cmd[1024];
    snprintf(cmd, sizeof cmd, "%s devices --backend sim 2>/dev/null", qmesh);
    CHECK(qm_test_run(cmd, out, sizeof out) == 0);
    CHECK(strstr(out, "0    n0.g0      h100-sxm5-80gb                79.20 GiB      78.70 GiB") != NULL);
    CHECK(strstr(out, "3    n0.g3      h100-sxm5-80gb                79.20 GiB      78.70 GiB") != NULL);
    CHECK(strstr(out, "backend: sim, 4 devices\n") != NULL);
    CHECK(strstr(out, "sim.g0") == NULL);
    /* the same capacity as the plan's device table on the same mesh */
    snprintf(cmd, sizeof cmd, "%s plan --qubits 30 --json 2>/dev/null", qmesh);
    CHECK(qm_test_run(cmd, out, sizeof out) == 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    CHECK(j != NULL);
    json_t *d0 = j ? json_array_get(json_object_get(j, "devices"), 0) : NULL;
    CHECK(d0 && strcmp(json_string_value(json_object_get(d0, "device")), "n0.g0") == 0);
    /* 78.70 GiB usable: 85045477376 B less the 512 MiB reserve of the built-in scenario */
    CHECK(d0 && json_integer_value(json_object_get(d0, "usable_bytes")) == 84508606464);
    json_decref(j);
}

/* iqp (issue 16): 34 qubits on hgx-h200 is feasible under equal with the exchange scratch per
 * device counted (1 GiB: the pieces of a 16 GiB shard's exchange); an uneven layout is E-POLICY naming the shard, with the hint of the
 * policy auto picks (single: 8 GiB fits one device of six-gpu); a batch needs no scratch. */
static void test_iqp(void)
{
    static char out[1 << 20];
    int rc = run(out, sizeof out, "hgx-h200.yaml --encoding iqp --qubits 34 --json", 0);
    CHECK(rc == 0);
    json_error_t err;
    json_t *o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (o) {
        CHECK(json_is_true(json_object_get(o, "feasible")));
        CHECK_STR(json_string_value(json_object_get(o, "policy")), "equal");
        CHECK(json_integer_value(json_object_get(json_object_get(o, "request"), "features")) == 595);
        json_t *devs = json_object_get(o, "devices");
        CHECK(json_array_size(devs) == 8);
        for (size_t i = 0; i < json_array_size(devs); ++i) {
            json_t *d = json_array_get(devs, i);
            /* 2^31 complex64 amplitudes = 16 GiB shard, 1 GiB scratch (the exchange runs in
             * pieces of at most 1 GiB), 2380 B staging (595 float32 values of the one sample) */
            CHECK(json_integer_value(json_object_get(d, "shard_bytes")) == (json_int_t)16 << 30);
            CHECK(json_integer_value(json_object_get(d, "scratch_bytes")) == (json_int_t)1 << 30);
            CHECK(json_integer_value(json_object_get(d, "planned_bytes")) ==
                  ((json_int_t)17 << 30) + 2380);
        }
        json_t *est = json_object_get(o, "estimates_s");
        CHECK(json_real_value(json_object_get(est, "local_norm")) == 0.0);
        CHECK(json_real_value(json_object_get(est, "encode")) > 0.0);
        json_decref(o);
    }
    /* the on-device passes of the CUDA backend's default iqp op (round 3: the phases with stages
     * 0..9 in one pass, then passes of at most 8 stages, at most ceil(bits / 10) of them; no
     * exchange on one device), at 4.8 TB/s x efficiency 0.9: one 2^31 complex64 state (16 GiB):
     * 1 + stages 10..30 in 3 passes of read + write (6); one 2^30 state (8 GiB): 1 + stages 10..29
     * as 7, 7, 6 (6), where round 2's 10 a pass made 1 + 4; a batch of 16 states of 2^20
     * (128 MiB): 1 + stages 10..19 as 5, 5 (4); states of 2^18: 1 + 2 (stages 10..17 in one) */
    const struct {
        const char *args;
        double passes, bytes;
    } on_device[] = {
        {"hgx-h200.yaml --encoding iqp --qubits 31 --policy single --json", 7.0, 17179869184.0},
        {"hgx-h200.yaml --encoding iqp --qubits 30 --policy single --json", 7.0, 8589934592.0},
        {"hgx-h200.yaml --encoding iqp --qubits 20 --batch 16 --policy single --json", 5.0,
         134217728.0},
        {"hgx-h200.yaml --encoding iqp --qubits 18 --batch 16 --policy single --json", 3.0,
         33554432.0},
        /* iqp-z is a product state (docs/encodings.md): one write, as angle and phase */
        {"hgx-h200.yaml --encoding iqp-z --qubits 30 --policy single --json", 1.0, 8589934592.0},
        {"hgx-h200.yaml --encoding iqp-z --qubits 20 --batch 16 --policy single --json", 1.0,
         134217728.0},
    };
    for (size_t k = 0; k < sizeof on_device / sizeof on_device[0]; ++k) {
        CHECK(run(out, sizeof out, on_device[k].args, 0) == 0);
        o = json_loads(out, 0, &err);
        CHECK(o != NULL);
        if (!o)
            continue;
        const double want = on_device[k].passes * on_device[k].bytes / (4.8e12 * 0.9);
        json_t *est = json_object_get(o, "estimates_s");
        CHECK(fabs(json_real_value(json_object_get(est, "encode")) - want) <= 1e-15 * want);
        json_decref(o);
    }
    /* the scratch is at most 1 GiB, not a shard: 34 qubits fit the hetero box's two A100s of
     * 38.49 GiB beside 32 GiB shards (a whole shard of scratch made it E-CAPACITY), and pcie-4x-l40s
     * too (43.99 GiB); 32 GiB + 2.32 KiB + 1 GiB planned per device */
    const char *fits34[] = {"hetero-h100-a100.yaml", "pcie-4x-l40s.yaml"};
    for (int k = 0; k < 2; ++k) {
        char args[128];
        snprintf(args, sizeof args, "%s --encoding iqp --qubits 34 --json", fits34[k]);
        CHECK(run(out, sizeof out, args, 0) == 0);
        o = json_loads(out, 0, &err);
        CHECK(o != NULL);
        if (!o)
            continue;
        CHECK(json_is_true(json_object_get(o, "feasible")));
        CHECK_STR(json_string_value(json_object_get(o, "policy")), "equal");
        json_t *devs = json_object_get(o, "devices");
        CHECK(json_array_size(devs) == 4);
        for (size_t i = 0; i < json_array_size(devs); ++i) {
            json_t *d = json_array_get(devs, i);
            CHECK(json_integer_value(json_object_get(d, "scratch_bytes")) == (json_int_t)1 << 30);
            CHECK(json_integer_value(json_object_get(d, "planned_bytes")) ==
                  ((json_int_t)33 << 30) + 2380);
        }
        json_decref(o);
    }
    /* weighted's pages over six devices (2, 2, 1, 1, 1, 1 pages of 1 GiB): the transform
     * exchanges pages, the scratch is a piece of 1 GiB per page held */
    rc = run(out, sizeof out, "six-gpu.yaml --encoding iqp --qubits 30 --policy weighted --json", 0);
    CHECK(rc == 0);
    o = json_loads(out, 0, &err);
    CHECK(o != NULL);
    if (o) {
        CHECK(json_is_true(json_object_get(o, "feasible")));
        json_t *devs = json_object_get(o, "devices");
        CHECK(json_array_size(devs) == 6);
        for (size_t i = 0; i < json_array_size(devs); ++i) {
            json_t *d = json_array_get(devs, i);
            const json_int_t pages = i < 2 ? 2 : 1;
            CHECK(json_integer_value(json_object_get(d, "shard_bytes")) == pages << 30);
            CHECK(json_integer_value(json_object_get(d, "scratch_bytes")) == pages << 30);
        }
        json_decref(o);
    }
    /* and auto takes it for 34 and 35 qubits (32 / 64 GiB on two devices, beside 2 GiB of
     * scratch, of 73.51 GiB): where a layout of equal shards fitted 33 */
    for (int q = 34; q <= 35; ++q) {
        char args[96];
        snprintf(args, sizeof args, "six-gpu.yaml --encoding iqp --qubits %d --json", q);
        CHECK(run(out, sizeof out, args, 0) == 0);
        CHECK(strstr(out, "\"policy\": \"weighted\"") != NULL &&
              strstr(out, "\"feasible\": true") != NULL);
    }
    /* the text plan's scratch line: its range over the devices, the exchange stages and pieces */
    CHECK(run(out, sizeof out, "six-gpu.yaml --encoding iqp --qubits 34", 0) == 0);
    CHECK(strstr(out, "\nscratch:  1.00 GiB to 2.00 GiB on each device holding a shard (one piece "
                      "per page it holds), for the iqp transform's exchanges (counted in "
                      "headroom): 3 stages between pages of 16.00 GiB, each in pieces of 1.00 "
                      "GiB\n") != NULL);
    CHECK(run(out, sizeof out, "hgx-h200.yaml --encoding iqp --qubits 28", 0) == 0);
    CHECK(strstr(out, "\nscratch:  256.00 MiB on each device holding a shard, for the iqp "
                      "transform's exchanges (counted in headroom): 3 stages between pages of "
                      "256.00 MiB, each in pieces of 256.00 MiB\n") != NULL);
    rc = run(out, sizeof out, "six-gpu.yaml --encoding iqp --qubits 30 --policy balanced", 1);
    CHECK(rc == 1);
    CHECK_STR(out, "error[E-POLICY]: plan: balanced: the iqp transform needs shards of whole "
                   "aligned power-of-two pages, at most 4096 of them, but shard 0 [0, 178956971) "
                   "makes pages of 1 amplitude (1073741824 pages); use --policy single\n");
    rc = run(out, sizeof out, "hgx-h200.yaml --encoding iqp --qubits 20 --batch 16 --json", 0);
    CHECK(rc == 0);
    CHECK(strstr(out, "\"scratch_bytes\": 16777216") == NULL && strstr(out, "\"scratch_bytes\": 0"));
    /* iqp-z needs no transform: any policy's layout, no scratch, no exchange */
    rc = run(out, sizeof out, "six-gpu.yaml --encoding iqp-z --qubits 30 --policy weighted --json", 0);
    CHECK(rc == 0);
    CHECK(strstr(out, "\"feasible\": true") != NULL && strstr(out, "\"scratch_bytes\": 0") != NULL);
    for (char d = '1'; d <= '9'; ++d) {
        char key[32];
        snprintf(key, sizeof key, "\"scratch_bytes\": %c", d);
        CHECK(strstr(out, key) == NULL);
    }
}

/* The plan JSON of `args` (exit 0 checked) in *o (the caller's to json_decref) and its
 * estimates_s, or NULL (checked, *o freed). */
static json_t *plan_estimates(const char *args, json_t **o)
{
    static char out[1 << 20];
    CHECK(run(out, sizeof out, args, 0) == 0);
    json_error_t err;
    *o = json_loads(out, 0, &err);
    json_t *est = *o ? json_object_get(*o, "estimates_s") : NULL;
    CHECK(est != NULL);
    if (!est) {
        json_decref(*o);
        *o = NULL;
    }
    return est;
}

/* angle, basis, phase: no norm pass, no all-reduce, one write of the largest shard (cost.c). */
static void test_product_costs(void)
{
    const char *encs[] = {"angle", "phase"};
    for (int e = 0; e < 2; ++e) {
        char args[128];
        snprintf(args, sizeof args, "hgx-h200.yaml --qubits 34 --encoding %s --json", encs[e]);
        json_t *o, *est = plan_estimates(args, &o);
        if (!est)
            continue;
        CHECK(json_real_value(json_object_get(est, "local_norm")) == 0.0);
        CHECK(json_real_value(json_object_get(est, "norm_allreduce")) == 0.0);
        /* 8 shards of 2^34 x 8 B / 8 = 16 GiB; HBM 4.8 TB/s x efficiency 0.9 */
        const double want = 17179869184.0 / (4.8e12 * 0.9);
        CHECK(fabs(json_real_value(json_object_get(est, "encode")) - want) <= 1e-15 * want);
        CHECK(json_integer_value(json_object_get(json_object_get(o, "request"), "features")) == 34);
        json_decref(o);
    }
}

/* An amplitude batch's per-state host work (cost.c, docs/planner.md "Cost model"): local_norm =
 * the HBM read + the most states of any rank x 1.5 ns (their piece sums), norm_allreduce = every
 * state x 6 ns (the merge and coefficients), the built-in defaults.host_batch. */
static void test_batch_host_costs(void)
{
    const struct {
        const char *args;
        double shard_bytes, hbm, rank_states, states;
    } cases[] = {
        /* one H200: 65536 states of 2^10 complex128 (1 GiB), all on rank 0 */
        {"hgx-h200.yaml --qubits 10 --batch 65536 --features 1024 --dtype complex128 --policy "
         "single --json",
         1073741824.0, 4.8e12 * 0.9, 65536.0, 65536.0},
        /* 4 hosts (ranks) x 4 A100: 1000 states of 2^4 complex64 dealt 250 a rank, 62 or 63 a
         * device (the largest shard: 63 x 16 x 8 B; HBM 1555 GB/s, efficiency 1) */
        {"a100-4node-hdr.yaml --qubits 4 --batch 1000 --features 16 --json", 8064.0, 1555e9,
         250.0, 1000.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        json_t *o, *est = plan_estimates(cases[k].args, &o);
        if (!est)
            continue;
        const double ln = json_real_value(json_object_get(est, "local_norm"));
        const double ar = json_real_value(json_object_get(est, "norm_allreduce"));
        const double want_ar = cases[k].states * 6e-9;
        CHECK(fabs(ar - want_ar) <= 1e-15 * want_ar);
        const double want_ln = cases[k].shard_bytes / cases[k].hbm + cases[k].rank_states * 1.5e-9;
        CHECK(fabs(ln - want_ln) <= 1e-15 * want_ln);
        json_decref(o);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    qmesh = argv[1];
    srcdir = argv[2];
    test_json();
    test_bad_requests();
    test_max();
    test_devices();
    test_iqp();
    test_product_costs();
    test_batch_host_costs();
    return qm_test_end("test_plan_cli");
}
