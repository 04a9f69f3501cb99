#define _POSIX_C_SOURCE 200809L /* popen */
/* testlib.c — see testlib.h. */
#include "testlib.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

int qm_test_runf(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len + sizeof " 2>&1" > sizeof cmd) {
        qm_test_fail(__FILE__, __LINE__, "qm_test_runf: command line too long (%d bytes)", len);
        out[0] = '\0';
        return -1;
    }
    strcat(cmd, " 2>&1");
    return qm_test_run(cmd, out, cap);
}

void qm_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_U64(fwrite(data, 1, n, f), n);
    CHECK(fclose(f) == 0);
}

unsigned char *qm_test_read_file(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *b = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc(sz > 0 ? (size_t)sz : 1)) != NULL)
        *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

int qm_test_same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = qm_test_read_file(a, &na), *y = qm_test_read_file(b, &nb);
    const int same = x && y && na == nb && na > 0 && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}
