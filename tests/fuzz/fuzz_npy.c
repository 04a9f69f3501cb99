/* fuzz_npy.c — libFuzzer harness for the `.npy` reader (engine/io_npy.c).
 *
 * Input: the whole bytes of a `.npy` file. Steps: qm_npy_header_parse on the bytes (file size =
 * input size); then the bytes are written to one file in the per-process scratch directory
 * (fuzz_common.h), opened with qm_npy_open, and read with qm_npy_read_range: the whole array (up
 * to 1 MiB), the first and last element, a middle range, count 0, and ranges past the end.
 * Oracles: ASan/UBSan and leaks; qm_npy_open agrees with qm_npy_header_parse (same code, same
 * facts); the facts are self-consistent (n_elems = B * F, data_offset + data_bytes = file size);
 * every range read returns exactly the file's element at data_offset + first * item_bytes (for a
 * Fortran-order 2-D array, each element from its column-major place), byte-swapped when the file
 * is big-endian and an integer converted to float64 (the reader's delivered dtype); ranges
 * outside the array fail with E-BOUNDS and count 0 succeeds.
 * State: the one scratch file, overwritten by every input, removed at exit.
 */
#include "fuzz_common.h"
#include "io.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_npy: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* What the reader delivers for file element `at`: the file's item (byte-swapped when big-endian),
 * a float as it is, an integer converted to float64; `es` bytes into out. */
static void expected_elem(const qm_npy_info *in, const uint8_t *data, uint64_t at, size_t es,
                          uint8_t *out)
{
    uint8_t item[8];
    const unsigned ib = in->item_bytes;
    for (unsigned b = 0; b < ib; ++b)
        item[b] = data[in->data_offset + at * ib + (in->big_endian ? ib - 1 - b : b)];
    if (in->kind == 'f' && ib > 2) {
        memcpy(out, item, es);
        return;
    }
    uint64_t u = 0;
    for (unsigned b = 0; b < ib; ++b)
        u |= (uint64_t)item[b] << (8 * b);
    double v;
    if (in->kind == 'f') { /* float16: (1 + m / 1024) 2^(e - 15), m 2^-24 below, inf and NaN */
        const unsigned e = (unsigned)(u >> 10) & 31u, m = (unsigned)u & 1023u;
        v = e == 31 ? (m ? NAN : INFINITY)
            : e == 0 ? (double)m * 0x1p-24
                     : (1.0 + (double)m / 1024.0) * ldexp(1.0, (int)e - 15);
        if (u >> 15)
            v = -v;
    } else if (in->kind == 'b') {
        v = u != 0;
    } else if (in->kind == 'i') {
        const uint64_t sign = (uint64_t)1 << (8 * ib - 1);
        const int64_t x = ib == 8 ? (int64_t)u : (int64_t)((u ^ sign) - sign);
        v = (double)x;
    } else {
        v = (double)u;
    }
    memcpy(out, &v, sizeof v);
}

static void check_range(qm_npy_reader *r, const qm_npy_info *in, const uint8_t *data,
                        uint64_t first, uint64_t count, size_t es)
{
    qm_status st;
    const bool inside = first <= in->n_elems && count <= in->n_elems - first;
    /* outside ranges must fail before writing: a small buffer lets ASan catch a write */
    void *dst = malloc(inside && count ? (size_t)(count * es) : 64);
    if (!dst)
        abort();
    qm_code rc = qm_npy_read_range(r, first, count, dst, &st);
    if (inside) {
        if (rc != QM_OK) {
            char buf[1024];
            FAIL("read_range(%llu, %llu) of %llu elements failed: %s", (unsigned long long)first,
                 (unsigned long long)count, (unsigned long long)in->n_elems,
                 qm_status_format(&st, buf, sizeof buf));
        }
        /* element k of the row-major order is file element k, or (k % F) * B + k / F for a
         * Fortran-order 2-D array (the reader transposes) */
        const bool fortran = in->fortran_order && in->ndim == 2;
        for (uint64_t i = 0; i < count; ++i) {
            const uint64_t k = first + i;
            const uint64_t at = fortran ? (k % in->n_features) * in->n_samples + k / in->n_features
                                        : k;
            uint8_t want[8];
            expected_elem(in, data, at, es, want);
            if (memcmp((const uint8_t *)dst + i * es, want, es) != 0)
                FAIL("read_range(%llu, %llu) returned other bytes than the file's at element "
                     "%llu (%s order)", (unsigned long long)first, (unsigned long long)count,
                     (unsigned long long)k, fortran ? "Fortran" : "C");
        }
    } else if (rc != QM_E_BOUNDS) {
        FAIL("read_range(%llu, %llu) of %llu elements returned %s, expected E-BOUNDS",
             (unsigned long long)first, (unsigned long long)count,
             (unsigned long long)in->n_elems, qm_code_name(rc));
    }
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qm_status st;
    qm_npy_info parsed;
    memset(&parsed, 0, sizeof parsed);
    const qm_code prc = qm_npy_header_parse("fuzz.npy", data, size, size, &parsed, &st);
    /* a shorter prefix must never read past itself (ASan checks; the result may differ) */
    if (size > 12) {
        qm_npy_info tmp;
        uint8_t *prefix = malloc(size / 2);
        if (!prefix)
            abort();
        memcpy(prefix, data, size / 2);
        (void)qm_npy_header_parse("fuzz.npy", prefix, size / 2, size, &tmp, &st);
        free(prefix);
    }

    char path[4200];
    qm_fuzz_write("in.npy", data, size, path, sizeof path);
    qm_npy_reader *r = NULL;
    const qm_code orc = qm_npy_open(path, &r, &st);
    if (orc != prc) {
        char buf[1024];
        FAIL("qm_npy_open returned %s but qm_npy_header_parse %s (%s)", qm_code_name(orc),
             qm_code_name(prc), qm_status_format(&st, buf, sizeof buf));
    }
    if ((orc == QM_OK) != (r != NULL))
        FAIL("qm_npy_open returned %s with reader %p", qm_code_name(orc), (void *)r);
    if (!r)
        return 0;
    const qm_npy_info *in = qm_npy_reader_info(r);
    if (memcmp(in, &parsed, sizeof *in) != 0)
        FAIL("qm_npy_open and qm_npy_header_parse disagree on the header's facts");
    const size_t es = in->dtype == QM_DTYPE_FLOAT32 ? 4 : in->dtype == QM_DTYPE_FLOAT64 ? 8 : 0;
    const bool kinds = (in->kind == 'f' && in->item_bytes == es) ||
                       (in->kind == 'f' && in->item_bytes == 2 && es == 8) || /* float16 */
                       (in->kind == 'b' && in->item_bytes == 1 && es == 8) || /* bool */
                       ((in->kind == 'i' || in->kind == 'u') && es == 8 &&
                        (in->item_bytes == 1 || in->item_bytes == 2 || in->item_bytes == 4 ||
                         in->item_bytes == 8));
    if (!es || !kinds || (in->ndim != 1 && in->ndim != 2) || in->n_elems == 0 ||
        in->n_elems != in->n_samples * in->n_features ||
        in->data_bytes != in->n_elems * in->item_bytes ||
        in->data_offset + in->data_bytes != size ||
        in->shape[0] != (in->ndim == 1 ? in->n_features : in->n_samples) ||
        (in->ndim == 2 && in->shape[1] != in->n_features) || (in->ndim == 1 && in->shape[1] != 0))
        FAIL("inconsistent header facts: kind %c%u, ndim %d, shape (%llu, %llu), B %llu, F %llu, "
             "n %llu, offset %llu, bytes %llu, file %zu", in->kind ? in->kind : '?',
             in->item_bytes, in->ndim, (unsigned long long)in->shape[0],
             (unsigned long long)in->shape[1], (unsigned long long)in->n_samples,
             (unsigned long long)in->n_features, (unsigned long long)in->n_elems,
             (unsigned long long)in->data_offset, (unsigned long long)in->data_bytes, size);
    const uint64_t n = in->n_elems;
    if (in->data_bytes <= (1u << 20))
        check_range(r, in, data, 0, n, es);
    check_range(r, in, data, 0, 1, es);
    check_range(r, in, data, n - 1, 1, es);
    check_range(r, in, data, n / 2, n - n / 2 > 4096 ? 4096 : n - n / 2, es);
    check_range(r, in, data, n, 0, es);
    check_range(r, in, data, n, 1, es);
    check_range(r, in, data, n - 1, 2, es);
    check_range(r, in, data, 1, UINT64_MAX, es);
    check_range(r, in, data, UINT64_MAX, 1, es);
    qm_npy_close(r);
    return 0;
}
