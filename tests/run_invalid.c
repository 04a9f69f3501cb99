/* run_invalid.c — the invalid scenario corpus (CTest label `scenario`).
 *
 * Usage: run_invalid DIR. Every .yaml file of DIR (read at run time, in name order) must fail
 * `qmesh topo validate` (qm_cli_topo_validate_to: exit status 1), and its diagnostics must match
 * the POSIX extended regex on its first line, `# expect: <regex>`. The corpus must also name every
 * loader code of docs/scenario-format.md ("Error codes") in at least one expect line. Prints one line per file.
 */
#define _POSIX_C_SOURCE 200809L

#include "scenario_loader.h"

#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const loader_codes[] = {
    "E-YAML-SYNTAX", "E-SCHEMA-VERSION", "E-UNKNOWN-KEY", "E-DUP-KEY",       "E-MERGE-KEY",
    "E-MISSING-FIELD", "E-TYPE",         "E-DUP-ID",      "E-UNKNOWN-REF",   "E-SELF-LINK",
    "E-UNIT",        "E-RANGE",          "E-RESERVE",     "E-ENUM",          "E-NUMA",
    "E-CROSS-HOST-LINK", "E-RANK",       "E-DISCONNECTED",
};
#define N_CODES (sizeof loader_codes / sizeof loader_codes[0])

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The whole content of f (rewound), NUL-terminated; NULL when out of memory. */
static char *slurp(FILE *f)
{
    long n;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    return buf;
}

/* 0 when the file behaves as its expect line says; prints why not otherwise. */
static int run_one(const char *path, bool covered[N_CODES])
{
    char line[2048];
    FILE *f = fopen(path, "rb");
    if (!f || !fgets(line, sizeof line, f)) {
        printf("FAIL %s: cannot read its first line\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    fclose(f);
    static const char tag[] = "# expect: ";
    if (strncmp(line, tag, sizeof tag - 1) != 0) {
        printf("FAIL %s: the first line must be '# expect: <regex>'\n", path);
        return 1;
    }
    char *re_text = line + sizeof tag - 1;
    re_text[strcspn(re_text, "\r\n")] = '\0';
    for (size_t c = 0; c < N_CODES; ++c) {
        char needle[64];
        snprintf(needle, sizeof needle, "error\\[%s\\]", loader_codes[c]);
        if (strstr(re_text, needle))
            covered[c] = true;
    }
    regex_t re;
    if (regcomp(&re, re_text, REG_EXTENDED | REG_NOSUB) != 0) {
        printf("FAIL %s: the expect line is not a valid extended regex: %s\n", path, re_text);
        return 1;
    }
    int bad = 1;
    FILE *out = tmpfile(), *err = tmpfile();
    char *args[] = {"validate", (char *)path, NULL};
    int status = out && err ? qm_cli_topo_validate_to(2, args, out, err) : -1;
    char *o = out ? slurp(out) : NULL, *e = err ? slurp(err) : NULL;
    size_t lo = o ? strlen(o) : 0, le = e ? strlen(e) : 0;
    char *all = malloc(lo + le + 1);
    if (all) {
        memcpy(all, o ? o : "", lo);
        memcpy(all + lo, e ? e : "", le + 1);
    }
    if (!all || status < 0)
        printf("FAIL %s: out of memory or no temporary file\n", path);
    else if (status != 1)
        printf("FAIL %s: validate exited %d, expected 1 (the file must not load)\n%s", path,
               status, all);
    else if (regexec(&re, all, 0, NULL, 0) != 0)
        printf("FAIL %s: output does not match /%s/:\n%s", path, re_text, all);
    else {
        printf("ok   %s\n", path);
        bad = 0;
    }
    regfree(&re);
    free(all);
    free(o);
    free(e);
    if (out)
        fclose(out);
    if (err)
        fclose(err);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: run_invalid DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("FAIL: cannot open the corpus directory '%s'\n", argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *ent; (ent = readdir(d));) {
        size_t len = strlen(ent->d_name);
        if (len < 6 || strcmp(ent->d_name + len - 5, ".yaml") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                return 1;
            names = nn;
        }
        size_t plen = strlen(argv[1]) + len + 2;
        names[n] = malloc(plen);
        if (!names[n])
            return 1;
        snprintf(names[n++], plen, "%s/%s", argv[1], ent->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int failures = 0;
    bool covered[N_CODES] = {false};
    for (size_t i = 0; i < n; ++i) {
        failures += run_one(names[i], covered);
        free(names[i]);
    }
    free(names);
    if (n == 0) {
        printf("FAIL: no .yaml file in '%s'\n", argv[1]);
        failures++;
    }
    for (size_t c = 0; c < N_CODES; ++c) {
        if (!covered[c]) {
            printf("FAIL: no file in the corpus expects error[%s]\n", loader_codes[c]);
            failures++;
        }
    }
    printf("run_invalid: %zu files, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
