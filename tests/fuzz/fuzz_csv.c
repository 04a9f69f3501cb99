/* fuzz_csv.c — libFuzzer harness for the CSV / gzip CSV reader (engine/io_csv.c).
 *
 * Input: one option byte, then the file's bytes. Option byte: bit 0 — gzip-compress the rest
 * before writing it (the fuzzer also reaches raw gzip streams, corrupt ones included, by starting
 * the rest with 1f 8b and leaving bit 0 clear); bits 1-2 — header auto / yes / no / auto with a
 * tab as the delimiter, or blanks (' ') when bit 3 is set too (the others: comma); bits
 * 3-4 — drop column: none, "0", "2", "label"; bits 5-7 — the chunked reader's chunk size
 * (QM_CSV_CHUNK_BYTES 1, 2, 3, 5, 7, 16, 64, 255) and the rows per read. The file is written to
 * the per-process scratch directory (fuzz_common.h) and read with qm_csv_load (the default 4 MiB
 * chunks), then with the chunked reader at the small chunk size. Both with a text limit of 1 MiB,
 * so a gzip bomb costs at most a million 1-byte chunks.
 * Oracles: ASan/UBSan and leaks; on success at least one sample and one feature, every value
 * readable, dropped_column -1 exactly when no column was asked to be dropped, gzip flag equal to
 * the file's magic; on failure the data left empty and a message that starts with the path. The
 * chunked reader (qm_csv_open, qm_csv_read_rows in pieces) gives the load's result exactly: the
 * same values bit for bit, shape and flags, or the same code and message (a file with a header
 * and no rows: from qm_csv_count_rows); after a successful load the count is the load's rows, and
 * a read after it gives the same values again.
 * State: the one scratch file, overwritten by every input, removed at exit; QM_CSV_CHUNK_BYTES,
 * set for every input.
 */
#include "fuzz_common.h"
#include "io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_csv: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* gzip-compress (deflate with the gzip wrapper); returns a malloc'd buffer. */
static unsigned char *gzip_bytes(const uint8_t *in, size_t n, size_t *out_n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    const size_t cap = deflateBound(&z, (uLong)n) + 32;
    unsigned char *out = malloc(cap);
    if (!out)
        abort();
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* The chunked reader at chunk size k_chunks[sel], read k_pieces[sel] rows at a time, against the
 * load's result (rc, st, d). */
static void chunked(const char *path, const qm_csv_options *opt, unsigned sel, qm_code rc,
                    const qm_status *st, const qm_csv_data *d)
{
    static const char *const k_chunks[8] = {"1", "2", "3", "5", "7", "16", "64", "255"};
    static const uint64_t k_pieces[8] = {1, 3, 2, 64, 1, 7, 1000, 5};
    setenv("QM_CSV_CHUNK_BYTES", k_chunks[sel & 7u], 1);
    const uint64_t piece = k_pieces[sel & 7u];
    qm_csv_options o = *opt;
    qm_status rs;
    qm_csv_reader *r = NULL;
    qm_code rrc = qm_csv_open(path, &o, &r, &rs);
    double *v = NULL;
    uint64_t rows = 0, cap = 0, F = 0;
    if (rrc == QM_OK) {
        F = qm_csv_reader_info_get(r)->n_features;
        for (;;) {
            if (rows + piece > cap) {
                cap = (rows + piece) * 2;
                v = realloc(v, (size_t)(cap * F) * sizeof *v);
                if (!v)
                    abort();
            }
            uint64_t got = 0;
            if ((rrc = qm_csv_read_rows(r, piece, v + rows * F, &got, &rs)) != QM_OK)
                break;
            rows += got;
            if (got < piece)
                break;
        }
        uint64_t counted = 0;
        if (rrc == QM_OK && rows == 0) /* a header and no rows: the count says so */
            rrc = qm_csv_count_rows(r, &counted, &rs);
    }
    if (rrc != rc || (rc != QM_OK && strcmp(rs.msg, st->msg) != 0))
        FAIL("chunk %s, %llu rows a read: %s '%s'; the load: %s '%s'", k_chunks[sel & 7u],
             (unsigned long long)piece, qm_code_name(rrc), rrc != QM_OK ? rs.msg : "",
             qm_code_name(rc), rc != QM_OK ? st->msg : "");
    if (rc == QM_OK) {
        const qm_csv_reader_info *i = qm_csv_reader_info_get(r);
        if (rows != d->n_samples || F != d->n_features || i->has_header != d->has_header ||
            i->gzip != d->gzip || i->dropped_column != d->dropped_column)
            FAIL("chunk %s: %llu x %llu (header %d, gzip %d, dropped %ld) against the load's "
                 "%llu x %llu (%d, %d, %ld)", k_chunks[sel & 7u], (unsigned long long)rows,
                 (unsigned long long)F, i->has_header, i->gzip, i->dropped_column,
                 (unsigned long long)d->n_samples, (unsigned long long)d->n_features,
                 d->has_header, d->gzip, d->dropped_column);
        if (memcmp(v, d->values, (size_t)(rows * F) * sizeof *v) != 0)
            FAIL("chunk %s: the values differ from the load's", k_chunks[sel & 7u]);
        /* counted, then read again in one piece */
        uint64_t counted = 0, got = 0;
        if (qm_csv_count_rows(r, &counted, &rs) != QM_OK || counted != rows)
            FAIL("chunk %s: counted %llu rows of %llu (%s)", k_chunks[sel & 7u],
                 (unsigned long long)counted, (unsigned long long)rows, rs.msg);
        memset(v, 0, (size_t)(rows * F) * sizeof *v);
        if (qm_csv_read_rows(r, rows + 1, v, &got, &rs) != QM_OK || got != rows ||
            memcmp(v, d->values, (size_t)(rows * F) * sizeof *v) != 0)
            FAIL("chunk %s: a read after the count differs (%llu rows)", k_chunks[sel & 7u],
                 (unsigned long long)got);
    } else if (r) {
        uint64_t counted = 0;
        if (qm_csv_count_rows(r, &counted, &rs) != QM_OK && strncmp(rs.msg, path, strlen(path)))
            FAIL("count message does not start with the path: %s", rs.msg);
    }
    free(v);
    qm_csv_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    const unsigned opt_byte = data[0];
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    const size_t text_n = n; /* the CSV text's size, when it is not a gzip stream of the fuzzer's */
    unsigned char *gz = NULL;
    if (opt_byte & 1u) {
        gz = gzip_bytes(body, n, &n);
        body = gz;
    }
    char path[4200];
    qm_fuzz_write("in.csv", body, n, path, sizeof path);
    const int is_gzip = n >= 2 && body[0] == 0x1f && body[1] == 0x8b;
    const int text_known = (opt_byte & 1u) || !is_gzip;
    free(gz);

    static const qm_csv_header headers[4] = {QM_CSV_HEADER_AUTO, QM_CSV_HEADER_YES,
                                             QM_CSV_HEADER_NO, QM_CSV_HEADER_AUTO};
    static const char *const drops[4] = {NULL, "0", "2", "label"};
    qm_csv_options opt;
    qm_csv_options_init(&opt);
    opt.header = headers[(opt_byte >> 1) & 3u];
    if (((opt_byte >> 1) & 3u) == 3u)
        opt.delimiter = opt_byte & 8u ? ' ' : '\t'; /* the second "auto": tabs or blanks */
    opt.drop_column = drops[(opt_byte >> 3) & 3u];

    opt.max_text_bytes = (uint64_t)1 << 20;

    qm_csv_data d;
    memset(&d, 0x5a, sizeof d); /* the reader must set every field */
    qm_status st;
    unsetenv("QM_CSV_CHUNK_BYTES");
    const qm_code rc = qm_csv_load(path, &opt, &d, &st);
    chunked(path, &opt, opt_byte >> 5, rc, &st, &d);
    if (rc != QM_OK) {
        if (d.values || d.n_samples || d.n_features)
            FAIL("failed load (%s) left data behind", qm_code_name(rc));
        if (strncmp(st.msg, path, strlen(path)) != 0)
            FAIL("message does not start with the path: %s", st.msg);
        qm_csv_data_fini(&d);
        return 0;
    }
    if (!d.values || d.n_samples < 1 || d.n_features < 1)
        FAIL("loaded %llu x %llu values at %p", (unsigned long long)d.n_samples,
             (unsigned long long)d.n_features, (void *)d.values);
    if ((d.dropped_column >= 0) != (opt.drop_column != NULL))
        FAIL("dropped column %ld with drop option %s", d.dropped_column,
             opt.drop_column ? opt.drop_column : "(none)");
    if (d.gzip != is_gzip)
        FAIL("gzip flag %d for a file whose magic says %d", d.gzip, is_gzip);
    if (text_known && (d.n_samples > text_n || d.n_features > text_n))
        FAIL("more values (%llu x %llu) than the text could hold (%zu bytes)",
             (unsigned long long)d.n_samples, (unsigned long long)d.n_features, text_n);
    volatile double sink = 0;
    for (uint64_t i = 0; i < d.n_samples * d.n_features; ++i)
        sink += d.values[i];
    (void)sink;
    qm_csv_data_fini(&d);
    if (d.values || d.n_samples || d.n_features)
        FAIL("qm_csv_data_fini left data behind");
    return 0;
}
