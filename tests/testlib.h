/* testlib.h — tiny assertion helpers for the C tests. Failures print file:line and the values and
 * make the test exit 1 at the end (QM_TEST_END); assertions stay on in every build type. */
#ifndef QM_TESTLIB_H
#define QM_TESTLIB_H

#include "qmesh.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#if defined(__GNUC__)
#define QM_TEST_PRINTF __attribute__((format(printf, 3, 4)))
#define QM_TEST_PRINTF_AT(f, a) __attribute__((format(printf, f, a)))
#else
#define QM_TEST_PRINTF
#define QM_TEST_PRINTF_AT(f, a)
#endif

extern int qm_test_failures;
extern int qm_test_checks;

void qm_test_fail(const char *file, int line, const char *fmt, ...);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        qm_test_checks++;                                                                          \
        if (!(cond))                                                                               \
            qm_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                                  \
    } while (0)
#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        qm_test_checks++;                                                                          \
        if (a_ != b_)                                                                              \
            qm_test_fail(__FILE__, __LINE__, "%s == %s: %llu != %llu", #a, #b, a_, b_);            \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        qm_test_checks++;                                                                          \
        if (strcmp((a), (b)) != 0)                                                                 \
            qm_test_fail(__FILE__, __LINE__, "%s == %s: '%s' != '%s'", #a, #b, (a), (b));          \
    } while (0)
/* The status holds `code` and its message contains `part`. */
#define CHECK_ERR(st, code_, part)                                                                 \
    do {                                                                                           \
        qm_test_checks++;                                                                          \
        if ((st).code != (code_) || !strstr((st).msg, (part)))                                     \
            qm_test_fail(__FILE__, __LINE__, "expected %s containing '%s', got %s: %s",            \
                         qm_code_name(code_), (part), qm_code_name((st).code), (st).msg);          \
    } while (0)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        qm_status st_ok_;                                                                          \
        qm_status_clear(&st_ok_);                                                                  \
        (void)st_ok_;                                                                              \
        qm_test_checks++;                                                                          \
        qm_code rc_ = (expr);                                                                      \
        if (rc_ != QM_OK)                                                                          \
            qm_test_fail(__FILE__, __LINE__, "%s returned %s", #expr, qm_code_name(rc_));          \
    } while (0)

/* Print "NAME: N checks, M failed"; returns the exit code: 1 when a check failed or none ran. */
int qm_test_end(const char *name);

/* Run a shell command line; its output (with whatever redirections the line has) into out,
 * truncated to cap - 1 bytes and NUL-terminated. Returns the exit status, -1 when it did not exit. */
int qm_test_run(const char *cmd, char *out, size_t cap);
/* qm_test_run of a printf-formatted command line with stderr joined to stdout (" 2>&1"). */
int qm_test_runf(char *out, size_t cap, const char *fmt, ...) QM_TEST_PRINTF_AT(3, 4);

/* Write n bytes to path (created or truncated), as checks: a failure counts as a failed check. */
void qm_test_write_file(const char *path, const void *data, size_t n);
/* The whole file (malloc'd, *n its size); NULL with *n = 0 when it cannot be read. */
unsigned char *qm_test_read_file(const char *path, size_t *n);
/* 1 when both files can be read, are not empty and hold the same bytes. */
int qm_test_same_file(const char *a, const char *b);

/* Resident set size of this process in bytes (from /proc/self/statm; 0 if unknown). */
uint64_t qm_test_rss_bytes(void);

#include <string.h>
#endif
