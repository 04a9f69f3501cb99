/* io.h — input and output files of `qmesh encode` (DESIGN.md section 7; docs/io.md).
 *
 * In: paths named by the user: `.npy` arrays (float32/float64, 1-D or 2-D, C or Fortran order)
 * and CSV text (optionally gzip-compressed, possibly starting with a UTF-8 byte-order mark). Out: array metadata plus element ranges read on demand (npy), a
 * whole float64 matrix (CSV), complex `.npy` result files and small text files written atomically,
 * and an output directory that exists.
 * Must not: touch a backend, know about plans or layouts, or leave a partial file under a requested
 * output name (every output goes through `<name>.tmp.<pid>` and a rename).
 *
 * Every input file is opened without blocking and must be a regular file: a FIFO, a device, a
 * socket or a directory is refused (E-IO "not a regular file (it is a FIFO)"), never waited on.
 *
 * Errors: E-IO for file problems (cannot open, read, write, rename; naming the file and errno's
 * text), E-INPUT for content problems (bad magic, malformed header, unsupported dtype, truncated
 * data, ragged CSV rows...), every message one line that starts with the file name.
 *
 * Known warts: little-endian hosts only (the `.npy` files read and written are little-endian and
 * their bytes are copied as they are; a big-endian build fails at compile time in io_npy.c).
 * Ranged reads are `.npy`-only: a CSV file is always read whole.
 * The input section is read by `qmesh encode`'s input step (encode.c) and, for
 * qm_input_file_kind, by the scenario loader.
 */
#ifndef QM_IO_H
#define QM_IO_H

#include "qmesh.h"

#include <stddef.h>
#include <stdint.h>

/* ---- input format sniffing ------------------------------------------------------------------- */

typedef enum qm_input_format {
    QM_INPUT_NPY = 0,   /* starts with "\x93NUMPY" */
    QM_INPUT_CSV,       /* anything else: plain CSV text */
    QM_INPUT_CSV_GZIP,  /* starts with the gzip magic 1f 8b: gzip-compressed CSV */
} qm_input_format;

/* Look at the first bytes of a file: its content decides, except that a file named "*.npy" (any
 * case) is always QM_INPUT_NPY, so that one with the wrong magic is reported as "not a .npy file:
 * bad magic" by qm_npy_open instead of being parsed as CSV. E-IO when it cannot be opened or read
 * or is not a regular file. */
qm_code qm_input_format_query(const char *path, qm_input_format *out, qm_status *st);

/* Open an input file for reading without ever blocking: open(O_NONBLOCK), then fstat. *fd_out is
 * the descriptor (blocking mode restored; close it) and *size_out the file's size; *fd_out is -1
 * on failure. E-IO "<path>: cannot open for reading: <errno text>", or "<path>: not a regular file
 * (it is a FIFO|a directory|a character device|a block device|a socket)" — so a FIFO or a device
 * named as input fails at once instead of hanging the process (and with it every MPI rank). */
qm_code qm_input_file_open(const char *path, int *fd_out, uint64_t *size_out, qm_status *st);
/* "a FIFO", "a directory", ... for a st_mode that is not a regular file ("not a file" otherwise);
 * the text of the message above, for loaders that word their own (the scenario loader). */
const char *qm_input_file_kind(unsigned mode);

/* ---- .npy input ------------------------------------------------------------------------------ */

/* The NumPy header limits: a v1 header length is 16-bit; v2/v3 lengths are capped here. */
#define QM_NPY_MAX_HEADER_BYTES 65536u
#define QM_NPY_PREAMBLE_MAX 12u /* magic (6) + version (2) + header length (2 or 4) */

typedef struct qm_npy_info {
    int version_major;   /* 1, 2 or 3 (minor is always 0) */
    int fortran_order;   /* 1: the file stores the array column-major ('fortran_order': True) */
    qm_dtype dtype;      /* QM_DTYPE_FLOAT32 ('<f4') or QM_DTYPE_FLOAT64 ('<f8') */
    int ndim;            /* 1 (one sample of F features) or 2 (B samples x F features) */
    uint64_t shape[2];   /* shape[1] is 0 for 1-D */
    uint64_t n_samples;  /* B: 1 for 1-D */
    uint64_t n_features; /* F: the columns qm_npy_read_range reads (shape[1] - 1 after a drop) */
    uint64_t n_elems;    /* B * F, never 0 */
    long dropped_column; /* -1, or the 0-based file column removed by qm_npy_reader_drop_column */
    uint64_t data_offset;/* byte offset of element 0 in the file */
    uint64_t data_bytes; /* n_elems * element size == file size - data_offset */
} qm_npy_info;

/* Parse and check a `.npy` header. `bytes` holds the first n_bytes of the file (at least the
 * preamble and the header when the file has them; more is ignored) and file_bytes is the file's
 * whole size; `subject` (the file name) starts every message. Strict and safe on arbitrary bytes:
 * reads only bytes[0, n_bytes). E-INPUT for bad magic, unsupported version, header length past
 * the end of the file or over QM_NPY_MAX_HEADER_BYTES, a header that is not a well-formed dict of
 * exactly 'descr', 'fortran_order', 'shape', a dtype other than '<f4'/'<f8', 0-D or
 * 3-D+ shapes, an empty array, a shape whose byte count overflows, and data shorter ("truncated:
 * expected N data bytes, found M") or longer than the shape says. */
qm_code qm_npy_header_parse(const char *subject, const unsigned char *bytes, size_t n_bytes,
                            uint64_t file_bytes, qm_npy_info *out, qm_status *st);

typedef struct qm_npy_reader qm_npy_reader;

/* Open a `.npy` file and read its header only (no data). *out is NULL on failure. E-IO when the
 * file cannot be opened, is not a regular file or cannot be read; E-INPUT as
 * qm_npy_header_parse. */
qm_code qm_npy_open(const char *path, qm_npy_reader **out, qm_status *st);
/* The header's facts. Cannot fail; the pointer lives as long as the reader. */
const qm_npy_info *qm_npy_reader_info(const qm_npy_reader *reader);
/* Copy elements [first_elem, first_elem + count) (row-major element indices of the B x F view, in
 * the file's dtype, little-endian) to dst, reading only the rows of the file that hold them (pread:
 * safe to call from several threads on one reader). A C-order file without a dropped column is one
 * pread into dst; otherwise the rows are read in blocks of at most 8 MiB (a Fortran-order file by
 * column segments, or whole short columns, then transposed; a dropped column skipped). E-BOUNDS
 * when the range is outside the array; E-IO when the read fails or the file shrank since it was
 * opened; E-NOMEM for the block buffer. count 0 is a no-op. */
qm_code qm_npy_read_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                          qm_status *st);
/* The bound on the buffer of ranged reads that are not one pread (a Fortran-order file, a dropped
 * column): QM_NPY_BLOCK_BYTES unless changed here (tests use tiny blocks to cross every block edge).
 * A block smaller than one row or one column still makes progress (one row, one column at a time).
 * E-ARG for 0. */
#define QM_NPY_BLOCK_BYTES ((uint64_t)8 << 20)
qm_code qm_npy_reader_set_block_bytes(qm_npy_reader *reader, uint64_t block_bytes, qm_status *st);
/* Remove file column `column` (0-based; a label column) from what the reader reads: afterwards
 * info's n_features is one less, n_elems follows, dropped_column is `column`, and every ranged read
 * still reads only the rows it needs. E-INPUT for a 1-D array ("cannot drop column 0 of a 1-D
 * array ..."), a column out of range ("drop column 5 is out of range (the file has 3 columns,
 * indices 0..2)"), or no column left; E-ARG when a column was already dropped. */
qm_code qm_npy_reader_drop_column(qm_npy_reader *reader, uint64_t column, qm_status *st);
/* NULL is a no-op. */
void qm_npy_close(qm_npy_reader *reader);

/* ---- CSV input ------------------------------------------------------------------------------- */

typedef enum qm_csv_header {
    QM_CSV_HEADER_AUTO = 0, /* the first row is a header when one of its fields (the dropped
                               column excepted, when given by index) is not a number */
    QM_CSV_HEADER_YES,      /* the first row is always a header */
    QM_CSV_HEADER_NO,       /* the first row is always data */
} qm_csv_header;

typedef struct qm_csv_options {
    qm_csv_header header;
    /* NULL: keep every column. Otherwise a column to remove (a label column): a header field equal
     * to this text, or else, when the text is a non-negative decimal integer, the 0-based column
     * index. The dropped column's fields are not parsed (they may hold text or be empty). */
    const char *drop_column;
    /* The most text bytes (after gzip decompression) read into memory; 0: QM_CSV_MAX_TEXT_BYTES.
     * A larger file is E-INPUT naming the limit (convert it to .npy, which is read by ranges). */
    uint64_t max_text_bytes;
} qm_csv_options;

/* The default limit on a CSV file's text: 16 GiB. */
#define QM_CSV_MAX_TEXT_BYTES ((uint64_t)16 << 30)

/* Options with header AUTO, no dropped column and the default text limit. */
void qm_csv_options_init(qm_csv_options *opt);

typedef struct qm_csv_data {
    double *values;       /* n_samples x n_features, row-major (malloc'd; qm_csv_data_fini) */
    uint64_t n_samples;   /* data rows */
    uint64_t n_features;  /* columns kept */
    int has_header;       /* 1 when the first row was taken as a header */
    int gzip;             /* 1 when the file was gzip-compressed */
    long dropped_column;  /* 0-based index of the removed column; -1 when none */
} qm_csv_data;

/* Read a whole CSV file (plain or gzip, detected by its magic bytes) into out (caller-owned; set
 * to empty on failure). opt may be NULL (defaults). Rules (docs/io.md): comma separator, one row
 * per line, "\r\n" or "\n" line ends, an optional final newline, a UTF-8 byte-order mark at the
 * start skipped (UTF-16 is refused), blank space around fields
 * ignored, numbers parsed with strtod and consumed whole ("nan", "inf" pass through as values).
 * E-INPUT naming the 1-based file line ("row"), the 1-based column and the text for: ragged rows
 * ("row 17 has 63 fields, expected 64"), empty fields, non-numbers, out-of-range numbers, blank
 * lines before the end, no data rows ("empty"), an unknown drop column, no column left; E-IO or
 * E-INPUT when the file cannot be read: a corrupt or truncated gzip stream, bytes after the last
 * gzip member that are not another member (concatenated members are read whole, as gzip -d does),
 * text over opt->max_text_bytes. Memory follows the data: the gzip text buffer grows by doubling
 * from 64 KiB, the value matrix by doubling as rows are parsed. */
qm_code qm_csv_load(const char *path, const qm_csv_options *opt, qm_csv_data *out, qm_status *st);
/* Free the values and reset to empty. NULL is a no-op. */
void qm_csv_data_fini(qm_csv_data *data);

/* ---- outputs --------------------------------------------------------------------------------- */

typedef struct qm_npy_writer qm_npy_writer;

/* Start writing a complex64 ('<c8') or complex128 ('<c16') array of shape (shape[0],) (ndim 1) or
 * (shape[0], shape[1]) (ndim 2) to `path`. The bytes go to "<path>.tmp.<pid>" in the same
 * directory; nothing appears under `path` until qm_npy_writer_commit. The header is NumPy 1.0
 * format, padded with spaces so that the data starts at a multiple of 64 bytes, ending in '\n'.
 * E-DTYPE for another dtype, E-ARG for a bad ndim or an empty/overflowing shape, E-IO (naming the
 * temporary file and errno's text) when it cannot be created. *out is NULL on failure. */
qm_code qm_npy_writer_open(const char *path, qm_dtype dtype, int ndim, const uint64_t *shape,
                           qm_npy_writer **out, qm_status *st);
/* Append n_elems complex elements (interleaved re, im in the writer's dtype). E-BOUNDS when this
 * would write more elements than the shape holds; E-IO when the write fails. On failure the
 * writer must still be committed (which then fails) or aborted. */
qm_code qm_npy_writer_write(qm_npy_writer *writer, const void *data, uint64_t n_elems,
                            qm_status *st);
/* Finish: check that every element was written (E-ARG "wrote N of M elements" otherwise), flush,
 * fsync and close the temporary file (E-IO on any failure), and rename it over `path` (E-IO).
 * Always consumes the writer: on failure the temporary file is removed and `path` is untouched. */
qm_code qm_npy_writer_commit(qm_npy_writer *writer, qm_status *st);
/* Give up: close and remove the temporary file, free the writer. NULL is a no-op. */
void qm_npy_writer_abort(qm_npy_writer *writer);

/* Write a small text file (a manifest) atomically: to "<path>.tmp.<pid>", flushed, fsync'd,
 * closed, then renamed over path. E-IO on any failure, after which path is untouched and no
 * temporary file remains. */
qm_code qm_atomic_write_text(const char *path, const char *text, qm_status *st);

/* `--out-dir`: make sure `path` is a directory, creating it (one level; the parent must exist) when
 * it is missing. OK when it already is a directory. E-IO when it exists as something else, when
 * the parent is missing, or when mkdir fails (naming the path and errno's text). */
qm_code qm_out_dir_create(const char *path, qm_status *st);

#endif
