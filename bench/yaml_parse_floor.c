/* yaml_parse_floor.c — the floor under `qmesh plan`'s load time: libyaml's event parser alone over
 * a scenario file (no tree, no qmesh code). Not built by CMake (a measurement, not a harness):
 *   gcc -O2 -o /tmp/yaml_parse_floor bench/yaml_parse_floor.c -lyaml
 *   python3 scenarios/gen/gen_big.py --hosts 1024 --gpus-per-host 8 /tmp/big8192.yaml
 *   /tmp/yaml_parse_floor /tmp/big8192.yaml
 * Result: bench/results/2026-12-03-planner-scale.md. */
#include <yaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n); fread(b, 1, n, f); fclose(f);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    yaml_parser_t p; yaml_event_t e; long events = 0;
    yaml_parser_initialize(&p); yaml_parser_set_input_string(&p, b, n);
    for (;;) { if (!yaml_parser_parse(&p, &e)) return 1; int done = e.type == YAML_STREAM_END_EVENT; yaml_event_delete(&e); ++events; if (done) break; }
    yaml_parser_delete(&p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%ld bytes, %ld events, libyaml events only: %.1f ms\n", n, events, 1e3*(t1.tv_sec-t0.tv_sec)+1e-6*(t1.tv_nsec-t0.tv_nsec));
    return 0;
}
