#define _POSIX_C_SOURCE 200809L /* popen */
/* testlib.c — see testlib.h. */
#include "testlib.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int qm_test_failures;
int qm_test_checks;

void qm_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    qm_test_failures++;
}

int qm_test_end(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, qm_test_checks, qm_test_failures);
    if (qm_test_checks == 0) {
        /* a test that checked nothing proves nothing: fail it (a GPU test without a GPU exits
         * 77 before it gets here) */
        printf("%s: FAIL: no check ran\n", name);
        return 1;
    }
    return qm_test_failures ? 1 : 0;
}

uint64_t qm_test_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0, rss = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

int qm_test_run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (!p) {
        out[0] = '\0';
        return -1;
    }
    while (n + 1 < cap) {
        size_t k = fread(out + n, 1, cap - 1 - n, p);
        if (k == 0)
            break;
        n += k;
    }
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
