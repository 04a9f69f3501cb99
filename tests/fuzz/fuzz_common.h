/* fuzz_common.h — what the libFuzzer harnesses of tests/fuzz share (docs/fuzzing.md).
 *
 * One scratch directory per process (mkdtemp under $TMPDIR, else /tmp), created on first use and
 * removed with everything in it at exit, so a harness that needs a path (the .npy and CSV readers
 * take paths, the CLI takes file names) leaves nothing behind after a normal exit. A crash leaves
 * the directory for inspection; its name starts with "qm-fuzz-".
 * Must not: keep state between inputs other than the directory itself; callers remove or
 * overwrite what they write there within the same input.
 */
#ifndef QM_FUZZ_COMMON_H
#define QM_FUZZ_COMMON_H

#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char qm_fuzz_dir_path[4096];

static inline int qm_fuzz_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : 0; /* best effort: keep going */
}

static inline void qm_fuzz_dir_remove(void)
{
    if (qm_fuzz_dir_path[0])
        nftw(qm_fuzz_dir_path, qm_fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Remove everything inside the scratch directory, keeping the directory itself. */
static inline int qm_fuzz_rm_inside(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

static inline void qm_fuzz_dir_clear(void)
{
    if (qm_fuzz_dir_path[0])
        nftw(qm_fuzz_dir_path, qm_fuzz_rm_inside, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory (absolute path); aborts when it cannot be made (a broken machine, not a
 * finding in the code under test). */
static inline const char *qm_fuzz_dir(void)
{
    if (!qm_fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !tmp[0] || strlen(tmp) > 3000)
            tmp = "/tmp";
        snprintf(qm_fuzz_dir_path, sizeof qm_fuzz_dir_path, "%s/qm-fuzz-XXXXXX", tmp);
        if (!mkdtemp(qm_fuzz_dir_path)) {
            perror("qm-fuzz: mkdtemp");
            abort();
        }
        atexit(qm_fuzz_dir_remove);
    }
    return qm_fuzz_dir_path;
}

/* Write size bytes to <scratch>/<name> (created or truncated); returns the path in buf, or aborts
 * when the write fails (disk full: not a finding). */
static inline const char *qm_fuzz_write(const char *name, const void *data, size_t size, char *buf,
                                  size_t buf_size)
{
    snprintf(buf, buf_size, "%s/%s", qm_fuzz_dir(), name);
    FILE *f = fopen(buf, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror("qm-fuzz: writing the input file");
        abort();
    }
    return buf;
}

#endif
