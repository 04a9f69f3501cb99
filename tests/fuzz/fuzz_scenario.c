/* fuzz_scenario.c — libFuzzer harness for the scenario loader (engine/scenario_load.c).
 *
 * Input: arbitrary bytes, loaded as `qmesh/1` YAML text with qm_scenario_load_string (NUL bytes,
 * invalid UTF-8, alias bombs and deep nesting included). A file that loads is dumped back
 * (qm_scenario_dump, into a memory stream) and the dump must load again: the dumper's contract is
 * "loads back", so a reload failure aborts and counts as a finding.
 * Oracles: ASan/UBSan, LeakSanitizer at exit of each input's allocations (libFuzzer's -detect_leaks),
 * the round trip above, and the diagnostics cap (at most QM_DIAGS_PER_LOAD + 1 entries).
 * State: none kept between inputs; no files.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "scenario_loader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qm_diags diags;
    qm_diags_init(&diags);
    qm_status st;
    qm_topology *t = NULL;
    qm_code rc = qm_scenario_load_string((const char *)data, size, "fuzz.yaml", &t, &diags, &st);
    if (diags.n > QM_DIAGS_PER_LOAD + 1) {
        fprintf(stderr, "fuzz_scenario: %d diagnostics, more than the cap %d + 1\n", diags.n,
                QM_DIAGS_PER_LOAD);
        abort();
    }
    if ((rc == QM_OK) != (t != NULL)) {
        fprintf(stderr, "fuzz_scenario: load returned %s with topology %p\n", qm_code_name(rc),
                (void *)t);
        abort();
    }
    qm_diags_fini(&diags);
    if (!t)
        return 0;

    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        abort();
    qm_code drc = qm_scenario_dump(t, mem, &st);
    if (fclose(mem) != 0)
        abort();
    if (drc != QM_OK) {
        char buf[1024];
        fprintf(stderr, "fuzz_scenario: dump of a loaded scenario failed: %s\n",
                qm_status_format(&st, buf, sizeof buf));
        abort();
    }
    qm_topology *t2 = NULL;
    qm_diags_init(&diags);
    if (qm_scenario_load_string(text, len, "fuzz-dump.yaml", &t2, &diags, &st) != QM_OK) {
        char buf[1024];
        fprintf(stderr, "fuzz_scenario: the dump of a valid scenario does not load back: %s\n"
                        "---- dump ----\n%s\n---- end ----\n",
                qm_status_format(&st, buf, sizeof buf), text);
        qm_diags_print(&diags, stderr);
        abort();
    }
    qm_diags_fini(&diags);
    if (t2->n_hosts != t->n_hosts || t2->n_gpus != t->n_gpus || t2->n_cases != t->n_cases) {
        fprintf(stderr, "fuzz_scenario: round trip changed the counts (hosts %d->%d, devices "
                        "%d->%d, cases %d->%d)\n", t->n_hosts, t2->n_hosts, t->n_gpus, t2->n_gpus,
                t->n_cases, t2->n_cases);
        abort();
    }
    qm_topology_destroy(t2);
    qm_topology_destroy(t);
    free(text);
    return 0;
}
