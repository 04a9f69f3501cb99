/* qmesh.h — the one public header of qmesh.
 *
 * Role: everything a user of the library needs: error codes, the status object every fallible call
 * fills, requests, scenarios, contexts (a request planned on a scenario, and the backend its
 * states live on) and states. docs/api.md describes every call, with an example.
 * Conventions: every fallible function returns a qm_code and takes a `qm_status *st` last (st may
 * be NULL); objects are opaque, created through `T **out` (NULL on failure) and destroyed with a
 * destroy function that accepts NULL. Distinct objects may be used from distinct threads at once;
 * one object (a context and the states made in it) by one thread at a time.
 * This header includes no CUDA, OpenMP, MPI, NCCL or libyaml header.
 */
#ifndef QMESH_H
#define QMESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QM_VERSION_MAJOR 0
#define QM_VERSION_MINOR 1
#define QM_VERSION_PATCH 0

/* Error codes. The printed name (qm_code_name) is part of the contract: scenario files, tests and
 * tools match on it. Loader and planner codes are listed in docs/scenario-format.md ("Error
 * codes"). */
typedef enum qm_code {
    QM_OK = 0,
    /* generic */
    QM_E_ARG,            /* "E-ARG": a bad argument to a library call (NULL, out of range) */
    QM_E_NOMEM,          /* "E-NOMEM": host memory could not be allocated */
    QM_E_BOUNDS,         /* "E-BOUNDS": an access outside a buffer or a shard */
    QM_E_BACKEND,        /* "E-BACKEND": a backend (CUDA, NCCL, MPI) call failed */
    QM_E_UNSUPPORTED,    /* "E-UNSUPPORTED": not compiled in, or not possible on this backend */
    QM_E_IO,             /* "E-IO": a file could not be read or written */
    QM_E_DTYPE,          /* "E-DTYPE": an unknown dtype, or a dtype mismatch */
    QM_E_INTERNAL,       /* "E-INTERNAL": an internal invariant failed (a bug: please report) */
    /* planner (docs/scenario-format.md, "Planner error codes a case may expect") */
    QM_E_QUBITS,         /* "E-QUBITS" */
    QM_E_CAPACITY,       /* "E-CAPACITY" */
    QM_E_NOT_POW2,       /* "E-NOT-POW2" */
    QM_E_SHARDS,         /* "E-SHARDS" */
    QM_E_NO_GATHER,      /* "E-NO-GATHER" */
    QM_E_POLICY,         /* "E-POLICY" */
    QM_E_INPUT,          /* "E-INPUT" */
    /* scenario loader (docs/scenario-format.md, "Error codes") */
    QM_E_YAML_SYNTAX,    /* "E-YAML-SYNTAX" */
    QM_E_SCHEMA_VERSION, /* "E-SCHEMA-VERSION" */
    QM_E_UNKNOWN_KEY,    /* "E-UNKNOWN-KEY" */
    QM_E_DUP_KEY,        /* "E-DUP-KEY" */
    QM_E_MERGE_KEY,      /* "E-MERGE-KEY" */
    QM_E_MISSING_FIELD,  /* "E-MISSING-FIELD" */
    QM_E_TYPE,           /* "E-TYPE" */
    QM_E_DUP_ID,         /* "E-DUP-ID" */
    QM_E_UNKNOWN_REF,    /* "E-UNKNOWN-REF" */
    QM_E_SELF_LINK,      /* "E-SELF-LINK" */
    QM_E_UNIT,           /* "E-UNIT" */
    QM_E_RANGE,          /* "E-RANGE" */
    QM_E_RESERVE,        /* "E-RESERVE" */
    QM_E_ENUM,           /* "E-ENUM" */
    QM_E_NUMA,           /* "E-NUMA" */
    QM_E_CROSS_HOST_LINK,/* "E-CROSS-HOST-LINK" */
    QM_E_RANK,           /* "E-RANK" */
    QM_E_DISCONNECTED,   /* "E-DISCONNECTED" */
    /* run outcomes (docs/reliability.md) */
    QM_E_NUMERIC,        /* "E-NUMERIC": a state failed its norm check (non-finite or off by more
                            than the documented bound) */
    QM_E_OUTPUT,         /* "E-OUTPUT": an output path cannot be written (missing or read-only
                            parent, a directory in the way, not enough free space, a file-size
                            limit) — found before any work where it can be */
    QM_E_INTERRUPTED,    /* "E-INTERRUPTED": SIGINT/SIGTERM stopped the run; nothing was left */
    QM_CODE_COUNT_
} qm_code;

/* "E-CAPACITY" etc.; "OK" for QM_OK; "E-?" for a value outside the enum. Cannot fail. */
const char *qm_code_name(qm_code code);

#define QM_STATUS_MSG_BYTES 512
#define QM_STATUS_FILE_BYTES 256

/* Filled by the function that detects a failure. Fixed size, so that an out-of-memory error can be
 * reported without allocating. Callers may add a prefix (qm_status_prefix) but never overwrite. */
typedef struct qm_status {
    qm_code code;
    int backend_code;                 /* e.g. the cudaError_t or MPI error; 0 when none */
    char file[QM_STATUS_FILE_BYTES];  /* scenario location, "" when none */
    int line, col;                    /* 1-based; 0 when none */
    char msg[QM_STATUS_MSG_BYTES];    /* one line: "<subject>: <problem> (<numbers>)[; <hint>]" */
} qm_status;

/* Reset to QM_OK with empty strings. st may be NULL (no-op). */
void qm_status_clear(qm_status *st);

/* Format "error[E-CAPACITY]: message" (with "file:line:col: " in front when a location is set)
 * into buf; returns buf. Cannot fail; truncates to buf_bytes. */
const char *qm_status_format(const qm_status *st, char *buf, size_t buf_bytes);

/* Human sizes and rates: "8.00 GiB", "512 B", "55.2 GB/s". Cannot fail; return buf. */
const char *qm_format_bytes(uint64_t bytes, char *buf, size_t buf_bytes);
const char *qm_format_rate(double bytes_per_s, char *buf, size_t buf_bytes);
const char *qm_format_seconds(double s, char *buf, size_t buf_bytes);

/* Amplitude and input element types. */
typedef enum qm_dtype {
    QM_DTYPE_FLOAT32 = 0,
    QM_DTYPE_FLOAT64 = 1,
    QM_DTYPE_COMPLEX64 = 2,
    QM_DTYPE_COMPLEX128 = 3,
} qm_dtype;

/* Bytes per element (0 for a value outside the enum) and names ("complex64"; NULL when unknown). */
size_t qm_dtype_size(qm_dtype dtype);
const char *qm_dtype_name(qm_dtype dtype);
/* Parse a dtype name. E-DTYPE naming the text when unknown. */
qm_code qm_dtype_parse(const char *text, qm_dtype *out, qm_status *st);



/* Layout policies (docs/planner.md) and encodings (docs/api.md). Names: "auto", "single", ... */
typedef enum qm_policy {
    QM_POLICY_AUTO = 0,
    QM_POLICY_SINGLE,
    QM_POLICY_EQUAL,
    QM_POLICY_WEIGHTED,
    QM_POLICY_BALANCED,
    QM_POLICY_REPLICATED,
    QM_POLICY_COUNT_
} qm_policy;

typedef enum qm_encoding {
    QM_ENCODING_AMPLITUDE = 0,
    QM_ENCODING_ANGLE,
    QM_ENCODING_BASIS,
    QM_ENCODING_PHASE,
    QM_ENCODING_IQP,
    QM_ENCODING_IQP_Z,         /* "iqp-z": IQP without the ZZ terms */
    QM_ENCODING_COUNT_
} qm_encoding;

const char *qm_policy_name(qm_policy p);     /* NULL when out of range */
const char *qm_encoding_name(qm_encoding e); /* NULL when out of range */

/* Input values per sample that an encoding of n qubits takes (docs/encodings.md): amplitude up
 * to 2^n (this returns 2^n, the most), angle, phase and iqp-z n, basis 1, iqp n + n(n-1)/2.
 * 0 for an unknown encoding or n > 63. Cannot fail. */
uint64_t qm_encoding_features(qm_encoding e, unsigned qubits);
/* The qubit count that F values per sample make for an encoding: amplitude the smallest n with
 * 2^n >= F (at least 1), angle/phase/iqp-z F, iqp the n with n + n(n-1)/2 = F; basis has none
 * (its one value is an index: returns 0). 0 when F fits no qubit count. Cannot fail. */
unsigned qm_encoding_qubits(qm_encoding e, uint64_t features);

/* Where states live: the CPU-simulated mesh of the scenario's devices, or CUDA GPUs (each device
 * of the plan a logical device of a GPU). AUTO is the simulator. */
typedef enum qm_backend_kind {
    QM_BACKEND_AUTO = 0,
    QM_BACKEND_SIM,
    QM_BACKEND_CUDA,
} qm_backend_kind;

/* ---- requests ----------------------------------------------------------------------------------
 * What to encode: the state's size and type, the layout policy, the input's shape. */
typedef struct qm_request {
    unsigned qubits;           /* 2^qubits amplitudes per state; at least 1 */
    qm_dtype dtype;            /* complex64 | complex128 */
    qm_policy policy;
    uint64_t batch;            /* states (input rows); at least 1 */
    uint64_t features;         /* input values per row; 0 = the encoding's (qm_encoding_features) */
    qm_encoding encoding;      /* amplitude, angle, basis, phase, iqp, iqp-z */
    char gather[64];           /* "auto", "host", "none" or a device id */
    int ranks;                 /* use the scenario's first k ranks; 0 = all */
} qm_request;

/* The defaults: policy auto, complex64, batch 1, features 0, amplitude, gather "auto", all ranks;
 * qubits 0 (must be set). Cannot fail. */
void qm_request_init(qm_request *r);

/* ---- scenarios ---------------------------------------------------------------------------------
 * A scenario describes the machine: hosts, devices, links, ranks (the qmesh/1 YAML format). */
typedef struct qm_scenario qm_scenario;

/* Load a scenario file, or the built-in simulated mesh when path is NULL. Errors carry the file,
 * line and column of the first problem (E-YAML-SYNTAX, E-UNKNOWN-KEY, ... ; E-IO). */
qm_code qm_scenario_open(const char *path, qm_scenario **out, qm_status *st);
/* Parse YAML text of len bytes; name is used in messages (NULL: "<text>"). */
qm_code qm_scenario_parse(const char *yaml, size_t len, const char *name, qm_scenario **out,
                          qm_status *st);
/* The file it came from, else its name. "" for NULL. Valid while the scenario lives. */
const char *qm_scenario_name(const qm_scenario *scenario);
/* Drops the caller's reference: contexts made from it keep it alive. NULL is a no-op. */
void qm_scenario_destroy(qm_scenario *scenario);

/* ---- states ------------------------------------------------------------------------------------
 * A state is a vector of 2^n complex amplitudes (or B such vectors in batch mode) split into shards,
 * each a contiguous global index range [start, end) held by one device of one rank. */
typedef struct qm_state qm_state;

typedef struct qm_shard_info {
    int shard;          /* shard id: position in global index order */
    int rank;
    int device;         /* device index in the mesh the state was created on */
    char device_id[64]; /* "n0.g3" */
    uint64_t start, end;/* half-open global amplitude range */
} qm_shard_info;

/* Drops a reference: the last one frees every device buffer of the state. NULL is a no-op. */
void qm_state_destroy(qm_state *state);
/* Adds a reference (dropped by qm_state_destroy), for a holder whose lifetime is not the caller's
 * (a binding's object, a consumer of a DLPack tensor). Returns state; NULL for NULL. Atomic: may
 * be called from any thread. Cannot fail. */
qm_state *qm_state_retain(const qm_state *state);
int qm_state_shard_count(const qm_state *state);          /* 0 for NULL */
unsigned qm_state_qubits(const qm_state *state);          /* 0 for NULL */
qm_dtype qm_state_dtype(const qm_state *state);
/* E-ARG ("out of range") for a shard id outside 0..count-1. */
qm_code qm_state_shard_query(const qm_state *state, int shard, qm_shard_info *out, qm_status *st);
/* A zero-copy view of one shard. The data pointer is the shard's own memory: host memory on the
 * simulated backend (host_accessible), a device pointer on CUDA. A view must not outlive its state:
 * qm_shard_view_valid says whether the state it came from still exists. */
typedef struct qm_shard_view {
    int shard, rank, device;
    char device_id[64];
    uint64_t start, end, length;  /* global range and its length in amplitudes */
    qm_dtype dtype;
    void *data;
    int host_accessible;          /* 1 when data can be read by the CPU */
    int device_kind;              /* 1 host memory (simulated device), 2 CUDA device memory */
    int cuda_device;              /* device_kind 2: the CUDA ordinal of the GPU holding the data
                                     (not the mesh device index: logical devices and MPI ranks
                                     map devices onto GPUs); -1 otherwise */
    uint64_t state_serial;        /* the state it belongs to */
} qm_shard_view;

/* E-ARG ("out of range") for a shard id outside 0..count-1; E-UNSUPPORTED for phantom memory. */
qm_code qm_state_shard_view(const qm_state *state, int shard, qm_shard_view *out, qm_status *st);
/* Whether the state the view came from has not been destroyed. Cannot fail. */
int qm_shard_view_valid(const qm_shard_view *view);

/* Gather the whole state onto one device of the same mesh: a new state with one shard
 * [0, amplitudes) on `device`, copied shard by shard (peer copies where the devices have a path,
 * staged through the host otherwise). E-CAPACITY when it does not fit; the source is unchanged. */
qm_code qm_state_gather(const qm_state *state, int device, qm_state **out, qm_status *st);

/* Copy amplitudes [start, start + count) to host memory dst (interleaved re, im in `dtype`, which
 * must be the state's dtype: E-DTYPE names both otherwise). Crosses shard boundaries. */
qm_code qm_state_read(const qm_state *state, uint64_t start, uint64_t count, qm_dtype dtype,
                      void *dst, qm_status *st);

/* Bytes moved by the backend that holds the state since that backend was opened, summed over its
 * devices: what proves where data went (an input already on the GPU crosses no host link). A
 * context's backend serves every state it encodes, so query right after the encode to see that
 * encode's traffic alone; reads (qm_state_read) add d2h bytes. An encode itself sends the norms'
 * block sums (8 bytes per block of up to 2^14 amplitudes) back to the host, never the data. */
typedef struct qm_traffic {
    uint64_t h2d_bytes;  /* host to device (on the simulator: into simulated device memory) */
    uint64_t d2h_bytes;  /* device to host */
    uint64_t d2d_bytes;  /* within a device */
    uint64_t peer_bytes; /* between devices, direct */
} qm_traffic;
/* E-ARG for a NULL state or out. */
qm_code qm_state_traffic(const qm_state *state, qm_traffic *out, qm_status *st);

/* ---- contexts ----------------------------------------------------------------------------------
 * A context is one request planned on one scenario, and (once opened) the backend its states live
 * on. A context is reference-counted by its states: qm_context_destroy drops the caller's
 * reference, and the backend is freed when the last state made in it is destroyed. */
typedef struct qm_context qm_context;

typedef struct qm_plan_info {
    int feasible;               /* 1 when every shard fits its device */
    qm_status error;            /* why not (code QM_OK when feasible) */
    qm_policy policy;           /* the policy used (auto resolved) */
    unsigned qubits;
    qm_dtype dtype;
    uint64_t batch, features;
    uint64_t amplitudes;        /* batch x 2^qubits */
    uint64_t state_bytes;       /* all states */
    int n_shards;
    int n_devices;              /* devices of the mesh */
    unsigned max_qubits[2];     /* the largest state that fits: [0] complex64, [1] complex128 */
} qm_plan_info;

/* Validate the request and plan it on the scenario's devices. An invalid request fails with its
 * code (E-QUBITS, E-DTYPE, E-POLICY, E-INPUT, E-RANK, E-ARG; *out NULL); a request that does not
 * fit still makes a context (QM_OK): qm_context_plan_info says feasible 0 and why. The context
 * keeps the scenario alive. */
qm_code qm_context_create(const qm_scenario *scenario, const qm_request *request,
                          qm_context **out, qm_status *st);
qm_code qm_context_plan_info(const qm_context *ctx, qm_plan_info *out, qm_status *st);
/* The planned shard `shard` (0..n_shards-1; E-ARG "out of range" otherwise). */
qm_code qm_context_plan_shard(const qm_context *ctx, int shard, qm_shard_info *out, qm_status *st);
/* The plan as JSON text (one object, two-space indents); free it with qm_free. */
qm_code qm_context_plan_json(const qm_context *ctx, char **out, qm_status *st);
/* Open the backend: QM_BACKEND_SIM (or AUTO), the scenario's devices simulated in host memory
 * (planned again first with host memory counted: E-CAPACITY when the state does not fit there);
 * QM_BACKEND_CUDA, one logical device per planned device, dealt over the visible GPUs. The plan's
 * own code when it is not feasible; E-ARG when already open; E-UNSUPPORTED without CUDA. */
qm_code qm_context_open(qm_context *ctx, qm_backend_kind backend, qm_status *st);

/* Input rows in host memory: rows x features values of dtype float32 or float64, row-major. */
typedef struct qm_host_data {
    qm_dtype dtype;
    const void *data;
    uint64_t rows, features;
} qm_host_data;

/* Amplitude-encode each row into its own state (row r: amplitudes [r * 2^qubits, (r+1) *
 * 2^qubits) of the result) on the opened backend. rows and features must be the request's batch
 * and features (E-INPUT naming both). E-INPUT also for NaN/Inf (the first index) or a zero row.
 * The state keeps the context alive. */
qm_code qm_context_encode(qm_context *ctx, const qm_host_data *in, qm_state **out, qm_status *st);
/* Input rows in device memory: the same description, with `data` a device pointer — on the CUDA
 * backend, device (or managed) memory of one of the GPUs the context's devices live on (e.g. a
 * torch or CuPy tensor's data pointer); on the simulator, whose device memory is host memory, a
 * host pointer. */
typedef qm_host_data qm_device_data;

/* The same from device memory: each shard on the GPU holding the input reads it in place (no copy
 * through the host); shards on other GPUs receive their part through the host. The memory must
 * stay valid and unchanged until the call returns (the state does not reference it).
 * E-UNSUPPORTED (naming the pointer and why) when no device of the context can read it; other
 * errors as qm_context_encode. */
qm_code qm_context_encode_device(qm_context *ctx, const qm_device_data *in, qm_state **out,
                                 qm_status *st);
/* The same from a file: .npy (float32/float64, 1-D or 2-D) or CSV (plain or gzip, numeric, an
 * optional header row). */
qm_code qm_context_encode_file(qm_context *ctx, const char *path, qm_state **out, qm_status *st);
/* The shape of an input file as qm_context_encode_file reads it, to make its request: rows (1 for
 * a 1-D .npy), features per row, ndim (1 or 2; a CSV file is 2) and the values' dtype (float32 or
 * float64); any out pointer may be NULL. A .npy file's header is read; a CSV file is parsed whole.
 * Errors as qm_context_encode_file's readers (E-IO, E-INPUT, E-DTYPE). */
qm_code qm_input_file_shape(const char *path, uint64_t *rows, uint64_t *features, int *ndim,
                            qm_dtype *dtype, qm_status *st);
/* The plan's data path (the CLI's `plan --input FILE --out F`): the estimates gain `read` and
 * `staging` for the input file `input` (NULL: none; a .npy or HDF5 header, a CSV file parsed
 * whole) and `write` for the output `output` (NULL: none; out_dir nonzero: a directory of shard
 * files, else one gathered .npy), with staging over the host links for QM_BACKEND_CUDA, else the
 * simulator's host copy; qm_context_plan_json then shows them. Nothing is written. The file must
 * hold what the context was planned for (E-INPUT naming both shapes otherwise); E-IO, E-INPUT,
 * E-DTYPE of the readers; E-ARG for a NULL ctx. A later call replaces the earlier data path. */
qm_code qm_context_plan_data_path(qm_context *ctx, const char *input, const char *output,
                                  int out_dir, qm_backend_kind backend, qm_status *st);
/* Drops the caller's reference. NULL is a no-op. */
void qm_context_destroy(qm_context *ctx);

/* ---- streams -----------------------------------------------------------------------------------
 * A dataset larger than device (or host) memory, encoded batch by batch: a stream reads batch k+1
 * (and up to `prefetch` batches ahead) on a reader thread while batch k is encoded, and yields each
 * batch as an ordinary state (reference-counted, DLPack-exportable) of up to batch_size samples,
 * in order; the states together are byte for byte the one-shot encode of the whole input. Host
 * memory for the input is bounded by prefetch + 1 batches (docs/api.md "Streams"). */
typedef struct qm_stream qm_stream;

typedef struct qm_stream_options {
    uint64_t batch_size;     /* samples per batch, at least 1; more than the data: one batch */
    int prefetch;            /* batches read ahead while one is encoded, 0..64; 0: no reader thread
                                (each batch read by qm_stream_next itself) */
    qm_backend_kind backend; /* where the states live (qm_context_open's backends) */
} qm_stream_options;

/* batch_size 1024, prefetch 2, backend AUTO. Cannot fail. */
void qm_stream_options_init(qm_stream_options *opts);

/* Open a stream over a file (.npy, HDF5 with its only dataset, or CSV; every one is read batch by
 * batch: a CSV file's rows are counted when it is opened and each batch's rows parsed when the
 * batch is read). The request says qubits (0: from the
 * input, as `qmesh encode` does), dtype, policy, encoding, gather and ranks; its batch and features
 * are the stream's (batch: min(batch_size, samples); features: the input's). Both batch shapes
 * (batch_size, and the last, shorter batch when the samples are not a multiple of it) are planned
 * here, so an infeasible batch fails now with the plan's code; the backend is opened here (the
 * last batch's on first use). E-ARG for a batch_size of 0 or a prefetch outside 0..64 (naming it),
 * the readers' errors (E-IO, E-INPUT, E-DTYPE), the planner's and qm_context_open's. *out is NULL
 * on failure. The stream keeps the scenario alive. */
qm_code qm_stream_open_file(const qm_scenario *scenario, const qm_request *request,
                            const char *path, const qm_stream_options *opts, qm_stream **out,
                            qm_status *st);
/* The same over rows in host memory (no reader thread: each batch is a slice of `rows`, which
 * must stay valid and unchanged until qm_stream_close). */
qm_code qm_stream_open_host(const qm_scenario *scenario, const qm_request *request,
                            const qm_host_data *rows, const qm_stream_options *opts,
                            qm_stream **out, qm_status *st);
/* The next batch as a new state (the caller destroys it; it stays valid after the stream moves on
 * or is closed). At the end of the data: QM_OK with *out NULL (the end is no error). A failure
 * (a read error, E-INPUT for a bad value naming its sample by its index in the whole input) ends
 * the stream: every later call returns the same code and message. */
qm_code qm_stream_next(qm_stream *stream, qm_state **out, qm_status *st);

typedef struct qm_stream_info {
    uint64_t samples;             /* rows of the whole input */
    uint64_t features;            /* values per row */
    int input_ndim;               /* 1 or 2, as the input file (host rows: 2) */
    unsigned qubits;
    qm_dtype dtype;               /* of the states */
    uint64_t batch_size;          /* samples per batch: min(batch_size asked, samples) */
    uint64_t batches;             /* ceil(samples / batch_size) */
    uint64_t batches_done;        /* states returned so far */
    uint64_t last_first_sample;   /* the last state returned: its first sample's index ... */
    uint64_t last_rows;           /* ... and its samples (0 before the first) */
    uint64_t batch_input_bytes;   /* input bytes of one full batch */
    int input_buffers;            /* host input buffers the stream may hold: prefetch + 1 (0 over
                                     host rows) */
    uint64_t input_bytes_peak;    /* the most host bytes of input buffers held at once */
    uint64_t device_bytes_peak;   /* the backend's allocation high-water mark, summed over its
                                     devices (the larger of the two batch shapes' backends) */
    double seconds_read;          /* reading batches (on the reader thread) */
    double seconds_wait;          /* qm_stream_next waiting for a batch to be read */
    double seconds_encode;        /* materializing the states */
} qm_stream_info;

/* What the stream has done so far. E-ARG for NULL. */
qm_code qm_stream_info_query(const qm_stream *stream, qm_stream_info *out, qm_status *st);
/* Stop the reader, free the input buffers and close the file; states already returned stay valid.
 * NULL is a no-op. */
void qm_stream_close(qm_stream *stream);

/* ---- devices -----------------------------------------------------------------------------------
 * What `qmesh devices` lists. */
typedef struct qm_device_info {
    int index;                 /* 0..count-1 */
    char id[64];               /* "n0.g0" (a simulated mesh device) or "cuda:0" */
    char name[96];             /* the model: "h100-sxm5-80gb", "NVIDIA H200" */
    uint64_t memory_bytes;     /* total device memory */
    uint64_t usable_bytes;     /* what allocations may take (memory minus the reserve) */
    double hbm_bw_bytes_per_s; /* 0 when unknown */
    int cuda_device;           /* the CUDA ordinal; -1 for a simulated device */
} qm_device_info;

/* The devices of `backend`: QM_BACKEND_CUDA the visible GPUs (E-UNSUPPORTED without one or
 * without CUDA support); QM_BACKEND_SIM the built-in simulated mesh (qm_scenario_open(NULL)'s
 * devices; no memory is taken); QM_BACKEND_AUTO the GPUs when there is at least one, else the
 * built-in mesh. *out is an array of *count entries (free it with qm_free); *listed (may be NULL)
 * says which of SIM and CUDA was listed. */
qm_code qm_devices_list(qm_backend_kind backend, qm_device_info **out, int *count,
                        qm_backend_kind *listed, qm_status *st);

/* Free memory the library returned (qm_context_plan_json, qm_devices_list). NULL is a no-op. */
void qm_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* QMESH_H */
