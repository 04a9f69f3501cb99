/* io.h — input and output files of `qmesh encode` (docs/io.md).
 *
 * In: paths named by the user: `.npy` arrays (float32/float64 or integers of 1 to 8 bytes, either
 * byte order, 1-D or 2-D, C or Fortran order),
 * HDF5 datasets (io_hdf5.c: float32/float64 or small integers, 1-D or 2-D) and CSV text (optionally gzip-compressed, possibly starting with a UTF-8 byte-order mark). Out: array metadata plus element ranges read on demand (npy),
 * float64 rows read in order, or a whole matrix (CSV), complex `.npy` result files and small text files written atomically,
 * and an output directory that exists.
 * Must not: touch a backend, know about plans or layouts, or leave a partial file under a requested
 * output name (every output goes through `.<name>.qmesh-tmp.<host>.<pid>` and a rename; an output
 * directory is built beside it under that name and swapped in as one step).
 *
 * Every input file is opened without blocking and must be a regular file: a FIFO, a device, a
 * socket or a directory is refused (E-IO "not a regular file (it is a FIFO)"), never waited on.
 *
 * Errors: E-IO for file problems (cannot open, read, write, rename; naming the file and errno's
 * text), E-OUTPUT for output paths that cannot take the output (found up front by qm_out_check,
 * or a write stopped by a full device or the file-size limit), E-INPUT for content problems (bad magic, malformed header, unsupported dtype, truncated
 * data, ragged CSV rows...), every message one line that starts with the file name.
 *
 * Known warts: little-endian hosts only (the `.npy` files written are little-endian; big-endian
 * and integer `.npy` input is converted on read; a big-endian build fails at compile time in
 * io_npy.c). Ranged reads are for `.npy` and HDF5: a CSV file is read in order, row after row
 * (qm_csv_read_rows, in bounded memory) or whole (qm_csv_load); only `.npy` ranges are read by
 * several threads (HDF5 serialises its calls).
 * The input section is read by `qmesh encode`'s input step (encode.c) and, for
 * qm_input_file_kind, by the scenario loader.
 */
#ifndef QM_IO_H
#define QM_IO_H

#include "qmesh.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- input format sniffing ------------------------------------------------------------------- */

typedef enum qm_input_format {
    QM_INPUT_NPY = 0,   /* starts with "\x93NUMPY" */
    QM_INPUT_CSV,       /* anything else: plain CSV text */
    QM_INPUT_CSV_GZIP,  /* starts with the gzip magic 1f 8b: gzip-compressed CSV */
    QM_INPUT_HDF5,      /* starts with the HDF5 signature 89 48 44 46 0d 0a 1a 0a */
} qm_input_format;

/* Look at the first bytes of a file: its content decides, except that a file named "*.npy" (any
 * case) is always QM_INPUT_NPY, so that one with the wrong magic is reported as "not a .npy file:
 * bad magic" by qm_npy_open instead of being parsed as CSV, and one named "*.h5" or "*.hdf5" is
 * QM_INPUT_HDF5 (a damaged file gets HDF5's reason, not a CSV parse error). E-IO when it cannot be opened or read
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
    qm_dtype dtype;      /* what reads deliver: QM_DTYPE_FLOAT32 (a 'f4' file) or QM_DTYPE_FLOAT64
                            (a 'f8' file, or an integer file, converted) */
    char kind;           /* the file's element kind: 'f' float, 'i' signed or 'u' unsigned integer */
    unsigned item_bytes; /* the file's element size: 4 or 8 (floats), 1, 2, 4 or 8 (integers) */
    int big_endian;      /* 1: the file's elements are big-endian ('>'), swapped on read */
    int ndim;            /* 1 (one sample of F features) or 2 (B samples x F features) */
    uint64_t shape[2];   /* shape[1] is 0 for 1-D */
    uint64_t n_samples;  /* B: 1 for 1-D */
    uint64_t n_features; /* F: the columns qm_npy_read_range reads (shape[1] - 1 after a drop) */
    uint64_t n_elems;    /* B * F, never 0 */
    long dropped_column; /* -1, or the 0-based file column removed by qm_npy_reader_drop_column */
    uint64_t data_offset;/* byte offset of element 0 in the file */
    uint64_t data_bytes; /* n_elems * item_bytes == file size - data_offset */
} qm_npy_info;

/* Parse and check a `.npy` header. `bytes` holds the first n_bytes of the file (at least the
 * preamble and the header when the file has them; more is ignored) and file_bytes is the file's
 * whole size; `subject` (the file name) starts every message. Strict and safe on arbitrary bytes:
 * reads only bytes[0, n_bytes). E-INPUT for bad magic, unsupported version, header length past
 * the end of the file or over QM_NPY_MAX_HEADER_BYTES, a header that is not a well-formed dict of
 * exactly 'descr', 'fortran_order', 'shape', a dtype other than f4, f8, i1..i8, u1..u8 (either
 * byte order: '<', '>', '|' for one byte, '=' as little-endian), 0-D or
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
/* Copy elements [first_elem, first_elem + count) (row-major element indices of the B x F view, as
 * info->dtype, native byte order) to dst, reading only the rows of the file that hold them (pread:
 * safe to call from several threads on one reader). The range is cut into pieces at multiples of
 * the block (QM_NPY_BLOCK_BYTES of file bytes, or the reader's block) that the reader's threads
 * (qm_npy_reader_set_threads) read at once; one thread and a little-endian float file read a
 * C-order range as one pread into dst. A piece of a C-order file without a dropped column is one
 * pread straight into dst; otherwise its rows are read in blocks (a Fortran-order file by column
 * segments, or whole short columns, then transposed; a dropped column skipped). Integer elements
 * become float64 (exact up to 2^53 in magnitude, rounded to nearest above), big-endian ones are
 * swapped: through a bounce buffer of one block per thread. posix_fadvise(WILLNEED) is given for
 * the bytes after the range (the next chunk of a sequential reader). Every thread is joined before
 * the call returns; the first failing piece's error is reported. E-BOUNDS when the range is outside
 * the array; E-IO when a read fails or the file shrank since it was opened; E-NOMEM for a buffer.
 * count 0 is a no-op. */
qm_code qm_npy_read_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                          qm_status *st);
/* The same range of an integer file, exactly: each element as 64 bits (a signed file's values
 * sign-extended: read them as int64_t; an unsigned file's as uint64_t). The basis encoding's
 * indices go through here, so an index above 2^53 is never rounded. E-DTYPE for a float file;
 * otherwise as qm_npy_read_range. */
qm_code qm_npy_read_int_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count,
                              uint64_t *dst, qm_status *st);
/* Read [first_elem, first_elem + count) into dst (as qm_npy_read_range) without waiting: the
 * reader's threads read it while the caller goes on; qm_npy_read_wait waits for it and reports
 * its result (each submitted read must be waited for exactly once, before qm_npy_close, and dst
 * must stay valid until then). Reads are served in submission order, but the workers start on
 * the next read as soon as every piece of the current one is taken, so a caller that keeps a few
 * reads submitted keeps every thread busy (ingest.c's staging ring). A reader with one thread,
 * or whose threads cannot start, reads the range in the submit itself. Errors found before the
 * read (E-BOUNDS, E-ARG, E-NOMEM) come from the submit, with no ticket; read errors from the wait. */
typedef struct qm_npy_read_ticket qm_npy_read_ticket;
qm_code qm_npy_read_submit(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                           qm_npy_read_ticket **out, qm_status *st);
qm_code qm_npy_read_wait(qm_npy_reader *reader, qm_npy_read_ticket *ticket, qm_status *st);
/* Threads of the ranged reads (1..QM_NPY_MAX_THREADS). The default is the environment's
 * QM_READ_THREADS when set (checked by qm_npy_open: E-ARG for anything but an integer in
 * [1, QM_NPY_MAX_THREADS]), else min(QM_NPY_DEFAULT_MAX_THREADS, online CPUs). E-ARG out of
 * range. Measured on a 16-core H200 host: 8 threads read the page cache at 33-36 GiB/s, 16 at
 * 63-64 GiB/s (session 8; 62 GiB/s in bench/results/2026-12-04-session10-h200.md), so the
 * default uses every core up to 32. */
#define QM_NPY_MAX_THREADS 64
#define QM_NPY_DEFAULT_MAX_THREADS 32
/* The thread count a new reader takes: QM_READ_THREADS, or min(32, online CPUs). E-ARG naming
 * `path` (the subject) for a QM_READ_THREADS outside [1, QM_NPY_MAX_THREADS]. */
qm_code qm_npy_default_threads(const char *path, int *out, qm_status *st);
qm_code qm_npy_reader_set_threads(qm_npy_reader *reader, int threads, qm_status *st);
/* The reader's thread count. Cannot fail. */
int qm_npy_reader_threads(const qm_npy_reader *reader);
/* Read C-order pieces with O_DIRECT (past the page cache: helps for a file that is not cached and
 * is larger than the free memory, costs a copy from an aligned bounce buffer otherwise). The file
 * is opened a second time with O_DIRECT; when the filesystem refuses it (tmpfs, some network file
 * systems) the reader keeps reading through the page cache and *active is false. A read refused
 * with EINVAL falls back to the page cache for that piece. The environment's QM_READ_DIRECT=1
 * turns it on at qm_npy_open. E-IO when the file's second open names another file. */
qm_code qm_npy_reader_set_direct(qm_npy_reader *reader, bool on, bool *active, qm_status *st);
/* Make the reader ready for the reads to come, off their critical path (`qmesh encode` calls it
 * while the CUDA context starts): its worker threads are started now instead of by the first
 * read (16 thread starts took 0.65-0.9 ms inside the first read on the H100 host), and, when
 * `resident` (the caller found the whole file in the page cache), reads no longer advise the
 * kernel to read their next span ahead: each posix_fadvise(WILLNEED) walks the span's cached
 * pages on the submitting thread, tens of microseconds per 8 MiB read. Cannot fail: a thread that
 * does not start is started (or done without) by the reads, as before. Call it with no read in
 * flight (like the other setters). */
void qm_npy_reader_prepare(qm_npy_reader *reader, bool resident);
/* The reader's worker threads running now (0 before the first parallel read or prepare); with a
 * shared pool (qm_npy_reader_use_pool), that pool's. */
int qm_npy_reader_workers(qm_npy_reader *reader);
/* Read threads that several readers share, one reader's range after another's or at the same
 * time (each read takes at most its reader's thread count of them): a C API context keeps one
 * from open to destroy so that every qm_context_encode_file reads with threads that are already
 * running (starting 16 took 0.65-0.9 ms inside an encode's first read on the H100 host).
 * `threads` workers start now (fewer when a thread cannot start; a read that wants more starts
 * them). NULL when out of memory: readers then use threads of their own. */
typedef struct qm_read_pool qm_read_pool;
qm_read_pool *qm_read_pool_create(int threads);
/* Stops and joins the threads: after every reader that uses the pool is closed. NULL: nothing. */
void qm_read_pool_destroy(qm_read_pool *pool);
/* The reader reads with `pool`'s threads from now on instead of its own (it does not own the
 * pool: closing the reader leaves it running). Call it with no read in flight, before the first
 * read or after a prepare (whose threads are stopped). NULL reader or pool: nothing. */
void qm_npy_reader_use_pool(qm_npy_reader *reader, qm_read_pool *pool);
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
/* The dropped column of the .npy and HDF5 readers: checks `column` against an array of ndim
 * dimensions (shape, cols columns) and sets *dropped (from -1), *n_features (cols - 1) and *n_elems
 * (shape[0] * that). E-ARG when a column was already dropped (`what`: "npy", "hdf5"); E-INPUT for a
 * 1-D array, a column out of range, or no column left; subject starts the message. */
qm_code qm_input_drop_column(const char *subject, const char *what, int ndim,
                             const uint64_t shape[2], uint64_t cols, uint64_t column,
                             long *dropped, uint64_t *n_features, uint64_t *n_elems, qm_status *st);

/* ---- HDF5 input (io_hdf5.c; io_hdf5_absent.c in a build without HDF5) ------------------------ */

typedef struct qm_hdf5_info {
    char dataset[256];   /* the dataset's full path in the file ("/x", "/group/x") */
    qm_dtype dtype;      /* what reads deliver: FLOAT32 (a 32-bit float dataset) or FLOAT64 (a
                            64- or 16-bit float dataset, or an integer one of up to 64 bits,
                            converted) */
    int ndim;            /* 1 (one sample) or 2 (B samples x F features) */
    uint64_t shape[2];   /* shape[1] is 0 for 1-D */
    uint64_t n_samples;  /* B: 1 for 1-D */
    uint64_t n_features; /* F: the columns read (shape[1] - 1 after a drop) */
    uint64_t n_elems;    /* B * F, never 0 */
    long dropped_column; /* -1, or the 0-based dataset column removed by qm_hdf5_reader_drop_column */
    bool chunked;        /* the dataset's storage layout is chunked (else contiguous or compact) */
} qm_hdf5_info;

typedef struct qm_hdf5_reader qm_hdf5_reader;

/* Open an HDF5 file read-only and pick its dataset: `dataset` (a path, "x" or "/g/x"), or when
 * NULL the only dataset anywhere in the file. Reads metadata only. *out is NULL on failure. E-IO
 * when the file cannot be opened or is not a regular file; E-INPUT when HDF5 cannot open it (with
 * HDF5's reason), when `dataset` is not in the file or the file holds none or several and none was
 * named (the datasets are listed), for 0-D or 3-D+ and empty datasets; E-DTYPE for a type that is
 * not a float of 16, 32 or 64 bits nor an integer of up to 64 bits (converted to float64: exactly
 * but for 64-bit integers beyond 2^53, rounded);
 * E-UNSUPPORTED in a build without HDF5. Every message starts "<path>: " and names the dataset. */
qm_code qm_hdf5_open(const char *path, const char *dataset, qm_hdf5_reader **out, qm_status *st);
/* Cannot fail; the pointer lives as long as the reader. */
const qm_hdf5_info *qm_hdf5_reader_info(const qm_hdf5_reader *reader);
/* Copy elements [first_elem, first_elem + count) (row-major indices of the B x F view, as
 * info->dtype, native byte order) to dst, through hyperslab selections of the rows that hold them,
 * at most QM_HDF5_BLOCK_BYTES (or the reader's block) per H5Dread. Safe to call from several
 * threads (the reader serialises its HDF5 calls). E-BOUNDS outside the array; E-IO when HDF5 fails
 * (its reason in the message). count 0 is a no-op. */
#define QM_HDF5_BLOCK_BYTES ((uint64_t)8 << 20)
qm_code qm_hdf5_read_range(qm_hdf5_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                           qm_status *st);
/* The most bytes one H5Dread delivers (tests use tiny blocks to cross every edge); E-ARG for 0. */
qm_code qm_hdf5_reader_set_block_bytes(qm_hdf5_reader *reader, uint64_t block_bytes, qm_status *st);
/* Remove dataset column `column` (0-based) from what is read, as qm_npy_reader_drop_column, with
 * the same errors. */
qm_code qm_hdf5_reader_drop_column(qm_hdf5_reader *reader, uint64_t column, qm_status *st);
/* NULL is a no-op. */
void qm_hdf5_close(qm_hdf5_reader *reader);

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
    /* The most text bytes (after gzip decompression) read; qm_csv_load: 0 is
     * QM_CSV_MAX_TEXT_BYTES; qm_csv_open: 0 is no limit (the reader holds a chunk, not the text).
     * A larger file is E-INPUT naming the limit (convert it to .npy, which is read by ranges). */
    uint64_t max_text_bytes;
    /* The field delimiter: ',' (qm_csv_options_init; 0 is ',' too), ';', '\t' or any other byte
     * but '"', '#', '\r' and '\n'; ' ' stands for blanks (a run of spaces and tabs separates
     * fields, blanks at a line's ends separate nothing). Blanks around fields (spaces; tabs unless
     * the delimiter is a tab) are ignored. A line whose first non-blank byte is '#' is a comment,
     * skipped wherever it is. */
    char delimiter;
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
 * to empty on failure): a loop of qm_csv_read_rows over a reader (below), so the rules, messages
 * and values are the reader's. opt may be NULL (defaults). Rules (docs/io.md): comma separator, one row
 * per line, "\r\n" or "\n" line ends, an optional final newline, a UTF-8 byte-order mark at the
 * start skipped (UTF-16 is refused), blank space around fields
 * ignored, numbers parsed with strtod and consumed whole ("nan", "inf" pass through as values).
 * E-INPUT naming the 1-based file line ("row"), the 1-based column and the text for: ragged rows
 * ("row 17 has 63 fields, expected 64"), empty fields, non-numbers, out-of-range numbers, blank
 * lines before the end, no data rows ("empty"), an unknown drop column, no column left; E-IO or
 * E-INPUT when the file cannot be read: a corrupt or truncated gzip stream, bytes after the last
 * gzip member that are not another member (concatenated members are read whole, as gzip -d does),
 * text over opt->max_text_bytes; E-ARG for a bad QM_CSV_CHUNK_BYTES. Errors come in text order:
 * a bad row before a damaged part of a gzip stream is the one reported. Memory follows the data:
 * the reader's chunks, and the value matrix, grown by doubling (from at most 1 MiB) as rows are
 * parsed. */
qm_code qm_csv_load(const char *path, const qm_csv_options *opt, qm_csv_data *out, qm_status *st);
/* Free the values and reset to empty. NULL is a no-op. */
void qm_csv_data_fini(qm_csv_data *data);

/* The CSV reader's chunk: the file (or the gzip stream, and its decompressed text) is read in
 * pieces of this many bytes. The environment's QM_CSV_CHUNK_BYTES sets it (an empty value is
 * unset), read by every qm_csv_open. */
#define QM_CSV_CHUNK_BYTES_DEFAULT ((uint64_t)4 << 20)
#define QM_CSV_CHUNK_BYTES_MAX ((uint64_t)1 << 30)
/* The chunk size a new reader takes: QM_CSV_CHUNK_BYTES, else QM_CSV_CHUNK_BYTES_DEFAULT. E-ARG
 * "<path>: QM_CSV_CHUNK_BYTES is 'x'; give a chunk size in bytes in [1, 1073741824] (default
 * 4194304)" for anything but a decimal integer in [1, QM_CSV_CHUNK_BYTES_MAX]. */
qm_code qm_csv_chunk_bytes_query(const char *path, uint64_t *out, qm_status *st);

/* A CSV file read row by row in bounded memory: a window of at most about two chunks (more only
 * for a line longer than a chunk; it starts at 64 KiB and grows only while reads fill it), the
 * gzip input chunk (at most the file's size), the first row's fields. Rows are read in
 * order; a row cut by chunk boundaries (1-byte chunks included) parses as it does whole. One
 * caller at a time (no locking). */
typedef struct qm_csv_reader qm_csv_reader;

typedef struct qm_csv_reader_info {
    const char *path;        /* the file, as opened (lives as long as the reader) */
    uint64_t n_columns;      /* fields per row in the file */
    uint64_t n_features;     /* values per row read: n_columns, less the dropped column */
    uint64_t n_rows;         /* data rows, once qm_csv_count_rows has counted them (else 0) */
    bool rows_known;         /* n_rows is set */
    uint64_t rows_read;      /* data rows read since the open or the last rewind */
    int has_header;          /* 1 when the first row was taken as a header */
    int gzip;                /* 1 when the file is gzip-compressed */
    long dropped_column;     /* 0-based index of the removed column; -1 when none */
    uint64_t chunk_bytes;    /* the reader's chunk (QM_CSV_CHUNK_BYTES) */
} qm_csv_reader_info;

/* Open a CSV file (plain or gzip by its magic bytes) and read up to its first row: a byte-order
 * mark skipped, the header decided and the dropped column found as qm_csv_load does, with the
 * same errors (UTF-16, empty, a blank first line, an unknown or out-of-range drop column, no
 * column left), plus E-ARG for a bad header option or QM_CSV_CHUNK_BYTES, E-IO when the file
 * cannot be opened or read. opt may be NULL (defaults; max_text_bytes 0 is no limit here). *out
 * is NULL on failure. */
qm_code qm_csv_open(const char *path, const qm_csv_options *opt, qm_csv_reader **out,
                    qm_status *st);
/* Read up to max_rows data rows, in order, into out (row-major, n_features float64 values each;
 * NULL: the rows are parsed and checked, not stored): *n_read rows were read, fewer than max_rows
 * only at the end of the text. Errors as qm_csv_load's (a ragged row, an empty field, a
 * non-number, a blank line before the end, a damaged gzip stream, text over the limit), each
 * naming the file line; the rows before the bad one are in out and counted in *n_read. A failure
 * is sticky: every later read returns it, until qm_csv_rewind. */
qm_code qm_csv_read_rows(qm_csv_reader *reader, uint64_t max_rows, double *out, uint64_t *n_read,
                         qm_status *st);
/* Pass over up to max_rows data rows without parsing them: only their line ends are found
 * (blank lines skipped as qm_csv_count_rows skips them), so a skipped row is never checked (its
 * fields are neither counted nor parsed: a bad value there is reported by a reader that reads
 * it; a blank line passed over before more rows is reported by the next qm_csv_read_rows, as a
 * read would report it). *n_skipped rows were passed, fewer only at the end of the text;
 * rows_read counts them. Errors: the source's (E-IO, a damaged gzip stream, text over the limit), sticky as
 * qm_csv_read_rows's; a failure kept from an earlier read is returned again. */
qm_code qm_csv_skip_rows(qm_csv_reader *reader, uint64_t max_rows, uint64_t *n_skipped,
                         qm_status *st);
/* Count the data rows of the whole file in one pass over its lines (non-blank lines after the
 * header; the values are not parsed, so a bad value is found when its row is read), then go back
 * to the first data row (as qm_csv_rewind). info's n_rows and rows_known are set. E-INPUT
 * "empty: no data rows (only the header row N)" for none; the source's errors (E-IO, a damaged
 * gzip stream). */
qm_code qm_csv_count_rows(qm_csv_reader *reader, uint64_t *rows, qm_status *st);
/* Go back to the first data row (the file read again from its start; a failure cleared). E-IO
 * when the file cannot be read again, or the open's errors when it has changed. */
qm_code qm_csv_rewind(qm_csv_reader *reader, qm_status *st);
/* Cannot fail; the pointer lives as long as the reader and follows its reads. */
const qm_csv_reader_info *qm_csv_reader_info_get(const qm_csv_reader *reader);
/* NULL is a no-op. */
void qm_csv_close(qm_csv_reader *reader);

/* ---- outputs --------------------------------------------------------------------------------- */

typedef struct qm_npy_writer qm_npy_writer;

/* The temporary name of `path`: "<dir>/.<base>.qmesh-tmp.<host>.<pid>" (host: gethostname with
 * anything but [A-Za-z0-9_-] as '_'; pid: this process). Returns its length, 0 when it does not fit
 * in cap. Cannot fail otherwise. */
size_t qm_out_tmp_name(const char *path, char *buf, size_t cap);

/* The byte count of a complex .npy file of this dtype and shape (header included). */
uint64_t qm_npy_file_bytes(qm_dtype dtype, int ndim, const uint64_t *shape);

/* Start writing a complex64 ('<c8') or complex128 ('<c16') array of shape (shape[0],) (ndim 1) or
 * (shape[0], shape[1]) (ndim 2) to `path`. The bytes go to qm_out_tmp_name(path) in the same
 * directory; nothing appears under `path` until qm_npy_writer_commit. The header is NumPy 1.0
 * format, padded with spaces so that the data starts at a multiple of 64 bytes, ending in '\n'.
 * E-DTYPE for another dtype, E-ARG for a bad ndim or an empty/overflowing shape, E-IO (naming the
 * temporary file and errno's text) when it cannot be created. *out is NULL on failure. */
qm_code qm_npy_writer_open(const char *path, qm_dtype dtype, int ndim, const uint64_t *shape,
                           qm_npy_writer **out, qm_status *st);
/* Append n_elems complex elements (interleaved re, im in the writer's dtype) after the elements
 * written so far (qm_npy_writer_write_at at that count; one caller at a time). E-BOUNDS when this
 * would write more elements than the shape holds; E-OUTPUT when the write stops at the file-size
 * limit (EFBIG: naming the bytes written, the file's size and the limit) or on a full device;
 * E-IO for any other write failure, and for an append after a failed one. On failure the writer
 * must still be committed (which then fails) or aborted. */
qm_code qm_npy_writer_write(qm_npy_writer *writer, const void *data, uint64_t n_elems,
                            qm_status *st);
/* Reserve the file's final size on its device (Linux fallocate: blocks reserved, nothing written;
 * one I/O step), so that a full device fails here, before any data, and the data is written in
 * place; a filesystem without fallocate is left as it is (the file grows as the data comes).
 * E-OUTPUT for a full device, a quota or the file-size limit (`cannot reserve 2.00 GiB for the
 * file (2147483776 bytes): No space left on device; ...`), E-IO otherwise; after a failure the
 * writer must be aborted. */
qm_code qm_npy_writer_reserve(qm_npy_writer *writer, qm_status *st);
/* Write n_elems complex elements at element index elem_off of the array, with pwrite at their
 * offset (after qm_npy_writer_reserve, in place). Thread-safe for disjoint ranges: io_pool.c's threads call it. `step` is the
 * I/O fault hook's step number, taken by whoever ordered the write (qm_out_pool_submit), so the
 * K-th step is the same write whatever the thread timing. Errors as qm_npy_writer_write;
 * E-BOUNDS for a range outside the shape, E-ARG after sync. A write after another one failed
 * still writes its range (and fails only for its own reason): the failure a caller reports is
 * then the failed write's, whichever thread got there first; the writer can only be aborted. */
qm_code qm_npy_writer_write_at(qm_npy_writer *writer, uint64_t elem_off, const void *data,
                               uint64_t n_elems, long step, qm_status *st);
/* Check that every element was written (E-ARG "wrote N of M elements" otherwise), fsync and close
 * the temporary file (E-IO). Does not rename: the writer must still be committed or aborted.
 * Calling it again after success is a no-op. */
qm_code qm_npy_writer_sync(qm_npy_writer *writer, qm_status *st);
/* Finish: qm_npy_writer_sync (when not done yet), then rename the temporary file over `path`
 * (E-IO). Always consumes the writer: on failure the temporary file is removed and `path` is
 * untouched. */
qm_code qm_npy_writer_commit(qm_npy_writer *writer, qm_status *st);
/* Give up: close and remove the temporary file, free the writer. NULL is a no-op. */
void qm_npy_writer_abort(qm_npy_writer *writer);

/* ---- parallel writes from page-locked staging (io_pool.c) ----------------------------------- */

/* Writer threads over caller-owned buffers: the caller acquires a free buffer, fills it (a device
 * copy), submits it with the writer and element offset it goes to, and fills the next one while
 * a thread writes it (pwrite at its offset, qm_npy_writer_write_at). The I/O step of each write
 * is numbered at submission, in the caller's order. Create: E-ARG, E-NOMEM (no thread could
 * start); the buffers are borrowed and must outlive the pool. */
typedef struct qm_out_pool qm_out_pool;
/* How `qmesh encode` writes its outputs through a pool (encode.c's read-back), and so how `qmesh
 * topo dump` measures a file system's write rate (discover_storage.c): QM_OUT_POOL_BUFS buffers of
 * QM_OUT_CHUNK_AMPS amplitudes (2 MiB of complex128) in flight, QM_OUT_POOL_THREADS threads. */
#define QM_OUT_POOL_BUFS 8
#define QM_OUT_POOL_THREADS 4
#define QM_OUT_CHUNK_AMPS ((uint64_t)1 << 17)
qm_code qm_out_pool_create(void *const *bufs, int n_bufs, int n_threads, qm_out_pool **out,
                           qm_status *st);
/* A free buffer (blocks while every buffer is queued or being written); its index in *idx. */
void *qm_out_pool_acquire(qm_out_pool *pool, int *idx);
/* Give back an acquired buffer that will not be submitted. */
void qm_out_pool_release(qm_out_pool *pool, int idx);
/* Write buffer idx's n_elems elements to writer at element elem_off, on a pool thread. Cannot
 * fail here: a failed write is kept (the first in submission order) for qm_out_pool_drain. */
void qm_out_pool_submit(qm_out_pool *pool, int idx, qm_npy_writer *writer, uint64_t elem_off,
                        uint64_t n_elems);
/* The same from memory the caller keeps valid and unchanged until qm_out_pool_drain has returned
 * (a simulated device's state, written without a copy); at most as many such writes are in flight
 * as there are buffers (blocks until one returns). */
void qm_out_pool_submit_ptr(qm_out_pool *pool, const void *data, qm_npy_writer *writer,
                            uint64_t elem_off, uint64_t n_elems);
/* Whether a submitted write has failed so far (the caller may stop reading early). */
bool qm_out_pool_failed(qm_out_pool *pool);
/* Wait until every submitted write has returned; the first failure in submission order (its
 * status into st), else QM_OK. */
qm_code qm_out_pool_drain(qm_out_pool *pool, qm_status *st);
/* Stop and join the threads after the queued writes (their errors dropped). NULL is a no-op. */
void qm_out_pool_destroy(qm_out_pool *pool);

/* Write a small text file (a manifest) atomically: to its temporary name, fsync'd, closed, then
 * renamed over path. E-IO on any failure, after which path is untouched and no temporary file
 * remains. */
qm_code qm_atomic_write_text(const char *path, const char *text, qm_status *st);

/* Make sure `path` is a directory, creating it (one level; the parent must exist) when it is
 * missing. OK when it already is a directory. E-IO when it exists as something else, when the
 * parent is missing, or when mkdir fails (naming the path and errno's text). */
qm_code qm_out_dir_create(const char *path, qm_status *st);

/* ---- `--out-dir` as one step ----------------------------------------------------------------- */

/* Create the sibling temporary directory qm_out_tmp_name(path) (its name into tmp, cap bytes;
 * tmp is "" on failure), where the new content is written. E-IO (E-OUTPUT on a full device). */
qm_code qm_out_dir_stage(const char *path, char *tmp, size_t cap, qm_status *st);
/* Put the directory tmp in place of path as one step: rename(2) when path does not exist, else
 * renameat2(RENAME_EXCHANGE), after which tmp holds the previous content (*replaced true; remove it
 * with qm_out_dir_remove). A filesystem without RENAME_EXCHANGE gets two renames through
 * ".<name>.qmesh-old.<host>.<pid>" (a crash between them is repaired by qm_out_stale_sweep). E-IO
 * on failure, after which path and tmp are as they were. */
qm_code qm_out_dir_swap(const char *path, const char *tmp, bool *replaced, qm_status *st);
/* Remove a temporary directory (or file) and what it holds. Best effort; NULL or "" is a no-op. */
void qm_out_dir_remove(const char *tmp);

/* Remove the temporaries of `path` (files or directories named qm_out_tmp_name would name them)
 * left by processes of this host that no longer exist (kill(pid, 0) fails with ESRCH, or the
 * process is a zombie: /proc/<pid>/stat state Z); a
 * ".qmesh-old." directory is renamed back to path when path is missing. *n_removed (may be NULL)
 * counts them. Best effort: returns QM_OK unless the arguments are bad. */
qm_code qm_out_stale_sweep(const char *path, int *n_removed, qm_status *st);

/* Before any work: can `path` take an output of total_bytes (its largest single file
 * largest_file bytes)? E-OUTPUT, naming the numbers, when the parent directory is missing, not a
 * directory or not writable; when --out names a directory or --out-dir names a file; when is_dir
 * and the directory holds entries but no manifest.json (not a qmesh output) unless force; when
 * statvfs's free space of the parent is below total_bytes; when RLIMIT_FSIZE is below
 * largest_file. */
qm_code qm_out_check(const char *path, bool is_dir, uint64_t total_bytes, uint64_t largest_file,
                     bool force, qm_status *st);

/* ---- fault injection (tests; docs/io.md) ------------------------------------------------------ */

/* Fail the k-th I/O step of output (open/create, write, fsync, close, rename, mkdir, exchange)
 * counted from this call, with errno err (0: EIO); k 0 turns it off. Process-wide. */
void qm_io_fault_set(long k, int err);
/* I/O steps counted since the last qm_io_fault_set. */
long qm_io_fault_steps(void);
/* Fail the k-th data pread of the `.npy` reader counted from this call (any thread) with errno err,
 * or, for err -1, end it short as at the end of the file (a file that shrank); k 0 turns it off.
 * Process-wide; independent of qm_io_fault_set. */
void qm_io_read_fault_set(long k, int err);

#endif
