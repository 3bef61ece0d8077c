/*
 * dump_probe.h: the native probe's C ABI (libdump_probe.so, built from src/probe_ffi of dumpview).
 *
 * The same bounded, sync-free capture as assets/dump_probe.py for code that Python hooks cannot
 * reach (fused kernels, ACLNN/AscendC/CUDA operators, C++ serving code), writing the same
 * manifest (docs/manifest.md), so every dumpview command reads its output unchanged.
 * docs/native_probe.md describes the whole contract; in short:
 *
 *   dp_session *s = NULL;
 *   dp_open("/tmp/run_a", -1, 0, &s);            // armed by DUMP_PROBE=1, else every call is a no-op
 *   dp_arm(s, request_id, "{\"token_ids\": [1, 2, 3]}");
 *   dp_capture(s, "layers.3.attn_out", &t);      // enqueues one async copy, never synchronizes
 *   dp_finish(s);                                // one sync per stream, statistics, manifest
 *   dp_close(s);
 *
 * Every function returns DP_OK (0) or a negative DP_ERR_* status and never aborts, raises or
 * unwinds into the caller; dp_last_error says why. A NULL session is a no-op returning
 * DP_ERR_NULL_ARGUMENT. Sessions are thread-safe. This header is checked against the library
 * by tests/native_probe.rs (dp_abi_constant, dp_abi_tensor_size).
 */
#ifndef DUMP_PROBE_H
#define DUMP_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI's version: bumped when a function, the struct or a constant changes incompatibly. */
#define DP_ABI_VERSION 1

/* Most dimensions a dp_tensor may have. */
#define DP_MAX_NDIM 16

/* The staging budget dp_open uses when given budget_bytes 0: 1 GiB per window. */
#define DP_DEFAULT_BUDGET_BYTES 1073741824ULL

/* dp_tensor.dtype: torch's dtypes of the same names. */
#define DP_FLOAT32 0
#define DP_FLOAT16 1
#define DP_BFLOAT16 2
#define DP_FLOAT64 3
#define DP_FLOAT8_E4M3FN 4
#define DP_FLOAT8_E5M2 5
#define DP_INT8 6
#define DP_INT16 7
#define DP_INT32 8
#define DP_INT64 9
#define DP_UINT8 10
#define DP_BOOL 11

/* dp_tensor.device_type. */
#define DP_DEVICE_HOST 0 /* host memory: recorded as device "cpu" */
#define DP_DEVICE_NPU 1  /* Ascend NPU memory (ACL backend): "npu:<device_index>" */
#define DP_DEVICE_CUDA 2 /* CUDA device memory (CUDA backend): "cuda:<device_index>" */

/* Statuses: 0 or negative. */
#define DP_OK 0
#define DP_ERR_NULL_ARGUMENT -1  /* a required pointer (session, out, label, stage, tensor, shape, strides, data) is NULL */
#define DP_ERR_STRUCT_SIZE -2    /* dp_tensor.struct_size is smaller than this header's sizeof(dp_tensor) */
#define DP_ERR_DTYPE -3          /* dp_tensor.dtype is none of DP_FLOAT32 .. DP_BOOL */
#define DP_ERR_NDIM -4           /* dp_tensor.ndim is negative or above DP_MAX_NDIM */
#define DP_ERR_LAYOUT -5         /* a negative size, stride or storage_offset; a span that overflows int64; a span outside storage_bytes */
#define DP_ERR_NAME -6           /* a stage or label that is empty, not UTF-8, longer than 4096 bytes, or holds a control character (newline) */
#define DP_ERR_METADATA -7       /* metadata_json is not a JSON object */
#define DP_ERR_DEVICE -8         /* the session's backend cannot read this device_type */
#define DP_ERR_OVER_BUDGET -9    /* skipped: the capture would exceed the window's staging budget (listed in skipped_over_budget) */
#define DP_ERR_GRAPH_CAPTURE -10 /* the stream is being captured into a graph: not supported natively, nothing enqueued */
#define DP_ERR_RUNTIME -11       /* a device runtime call failed (listed in the manifest's warnings) */
#define DP_ERR_IO -12            /* the window could not be written */
#define DP_ERR_CONFIG -13        /* dp_open: a DUMP_PROBE_* variable is invalid; the session is disarmed */
#define DP_ERR_BACKEND -14       /* dp_open: DUMP_PROBE_BACKEND names an unknown or unloadable runtime; the session is disarmed */
#define DP_ERR_CLOSED -15        /* the session was closed */
#define DP_ERR_INTERNAL -16      /* a bug in the probe, caught before it reached the caller */

typedef struct dp_session dp_session;

/* One tensor view. Element i (an index tuple) lives at
 * data + (storage_offset + sum(i_k * strides_k)) * element_size. */
typedef struct dp_tensor {
    uint32_t struct_size;   /* sizeof(dp_tensor): lets the struct grow compatibly */
    const void *data;       /* storage base; recorded as storage_ptr */
    uint64_t storage_bytes; /* bytes of the storage, 0 if unknown */
    uint64_t storage_id;    /* the caller's identity of the live storage, 0 if unknown */
    int32_t dtype;          /* DP_FLOAT32 .. DP_BOOL */
    int32_t ndim;           /* 0 .. DP_MAX_NDIM (16); 0 is a scalar */
    const int64_t *shape;   /* ndim sizes (may be NULL when ndim is 0) */
    const int64_t *strides; /* ndim strides, in elements (may be NULL when ndim is 0) */
    int64_t storage_offset; /* elements */
    int32_t device_type;    /* DP_DEVICE_HOST, DP_DEVICE_NPU, DP_DEVICE_CUDA */
    int32_t device_index;
    void *stream;           /* aclrtStream or cudaStream_t; may be NULL: the default stream */
    const char *shard;      /* NULL, or how this tensor lies in the full one over a parallel
                               group: tp:D, tp:D@OFFSET/FULL, cp:D, cp:D:zigzag, replicated:AXIS,
                               partial:AXIS (D may count from the end), over an axis dp_arm's
                               metadata_json gives as {"parallel": {"tp": [rank_in_group,
                               group_size]}} (docs/manifest.md "Parallel layouts"); one that
                               cannot be used is a warning, the record kept without it */
} dp_tensor;

/* Opens a session writing under dir (DUMP_PROBE_DIR overrides it; NULL: ./dump_probe_out) as
 * rank (negative: $RANK, else 0), staging at most budget_bytes per window (0:
 * DP_DEFAULT_BUDGET_BYTES). Without DUMP_PROBE=1 the session is disarmed: every call on it is
 * a no-op returning DP_OK. *out is set to a usable session even when the status is
 * DP_ERR_CONFIG or DP_ERR_BACKEND (then disarmed); it is NULL only with DP_ERR_NULL_ARGUMENT
 * (out itself NULL) or DP_ERR_INTERNAL. */
int dp_open(const char *dir, int rank, uint64_t budget_bytes, dp_session **out);

/* Opens a capture window for label (a request id) when DUMP_PROBE_MATCH/OCCURRENCE select it
 * (distinct labels, then calls of that label) on a rank DUMP_PROBE_RANKS selects; a window
 * still open is finished first. metadata_json (may be NULL) is a JSON object stored as the
 * manifest's metadata (token_ids, sampling parameters, weights path, topology). */
int dp_arm(dp_session *s, const char *label, const char *metadata_json);

/* One entry of a forward's row map (dp_arm_rows): count rows of one request, in the engine's
 * row order after the batch is condensed (docs/manifest.md, "Token rows"). */
typedef struct dp_rows_entry {
    const char *request;      /* the request id; NULL for padding rows (a graph's fixed batch), never compared */
    int64_t first_position;   /* the first row's 0-based token position in its request */
    int64_t count;            /* rows */
    const int64_t *positions; /* NULL: first_position, first_position + 1, ...; else count positions */
    const int64_t *token_ids; /* NULL, or count token ids (dumpview matches requests by them) */
} dp_rows_entry;

/* dp_arm with the forward's row map: n_rows entries at rows, in row order. Captures whose
 * dimension 0 is the map's row count get per-token-row statistics (dp_capture_rows says
 * otherwise), written to rows.f32 beside the manifest with the map (DUMP_PROBE_ROW_STATS,
 * DUMP_PROBE_ROW_POSITIONS bound them as in dump_probe.py). A map that cannot be used (a
 * negative count or position, an invalid request id, no entries) opens the window without
 * it and returns DP_ERR_METADATA, with a manifest warning. */
int dp_arm_rows(dp_session *s, const char *label, const char *metadata_json,
                const dp_rows_entry *rows, uint64_t n_rows);

/* dp_capture_rows' rows: which dimensions of t hold the forward's token rows. */
#define DP_ROWS_AUTO 0      /* dimension 0, when its size is the row map's row count (dp_capture's rule) */
#define DP_ROWS_NONE 1      /* none: weights, attention scores, cache state */
#define DP_ROWS_TOKENS 2    /* dimension 0, declared: a manifest warning where it does not fit */
#define DP_ROWS_TOKENS_2D 3 /* dimensions 0 and 1 ([batch, seq, ...]), declared */

/* Records t as the next occurrence of stage: checks the view, enqueues one asynchronous copy
 * of the span it reads into pinned host staging on t->stream (the host backend copies here),
 * and never synchronizes. A no-op returning DP_OK when no window is open (the arguments are
 * then not looked at: that path costs a few nanoseconds). */
int dp_capture(dp_session *s, const char *stage, const dp_tensor *t);

/* dp_capture, with the dimensions that hold the forward's token rows said (DP_ROWS_*; another
 * value: DP_ERR_LAYOUT). */
int dp_capture_rows(dp_session *s, const char *stage, const dp_tensor *t, int32_t rows);

/* Closes the open window: synchronizes each stream used once, computes the statistics on the
 * host in parallel, saves the tensors DUMP_PROBE_TENSOR selects, and writes
 * rank<R>/match<M>-occ<O>[.N]/manifest.json atomically, never over an existing window.
 * DP_OK when no window is open. */
int dp_finish(dp_session *s);

/* Frees the session's staging and libraries; a window still open is not written (a line on
 * stderr says so). Later calls on s return DP_ERR_CLOSED (a closed session keeps a few hundred
 * bytes so that they are safe). NULL is a no-op. */
void dp_close(dp_session *s);

/* Why the last failing call on s failed (s NULL: the last failing call given no session, or
 * dp_open), or "" when none did. The string belongs to the calling thread and stays valid
 * until its next dp_last_error call. Never NULL. */
const char *dp_last_error(const dp_session *s);

/* The statistics of one host view now, with no session and no copy (dump_probe.py's fused
 * statistics path for CPU tensors, DUMP_PROBE_LIB): out[7] = nan_count, inf_count, finite min
 * (+inf when no element is finite), finite max (-inf), finite sum, l2, pos_checksum, with the
 * definitions of dp_finish. split is NULL, or int64[6] {dim, full, offset, zigzag (0/1),
 * rank_in_group, group_size} putting the checksum at the full tensor's coordinates. Returns
 * DP_OK, or DP_ERR_NULL_ARGUMENT / DP_ERR_LAYOUT / DP_ERR_DTYPE / DP_ERR_DEVICE for a view
 * dp_capture would refuse (or a split that does not fit it). */
int dp_summarize(const dp_tensor *t, const int64_t *split, double *out);

/* The per-token-row statistics of one host view now, with no session and no copy (dump_probe.py's
 * token rows on CPU, docs/manifest.md "Token rows"): the view's logical elements in row-major
 * order, numel / rows to a row (k rows of its matrix view [rows * k, cols]), give
 * out[rows * 5] float32 = nonfinite_count, max_abs (of the finite elements), sum, sum_squares,
 * row_checksum (sum of x[j, c] * u(positions[r] * k + j) * v(c); 0 for a negative position,
 * padding) per row. Returns DP_OK, or DP_ERR_NULL_ARGUMENT, DP_ERR_LAYOUT (rows does not divide
 * numel), DP_ERR_DTYPE, DP_ERR_DEVICE. */
int dp_row_stats(const dp_tensor *t, uint64_t rows, const int64_t *positions, float *out);

/* ABI self-description, for checking this header against the library. */
#define DP_ABI_KEY_VERSION 0
#define DP_ABI_KEY_MAX_NDIM 1
#define DP_ABI_KEY_DEFAULT_BUDGET 2
#define DP_ABI_KEY_DTYPE_COUNT 3 /* number of dtypes: DP_BOOL + 1 */
#define DP_ABI_KEY_DEVICE_COUNT 4 /* number of device types: DP_DEVICE_CUDA + 1 */
#define DP_ABI_KEY_STATUS_MIN 5   /* the most negative status: DP_ERR_INTERNAL */

/* The library's value of the constant named by key (DP_ABI_KEY_*), or INT64_MIN for an unknown key. */
int64_t dp_abi_constant(int32_t key);

/* The library's sizeof(dp_tensor). */
uint32_t dp_abi_tensor_size(void);

/* The library's offset of dp_tensor's field number field (0: struct_size .. 12: shard), or
 * UINT32_MAX for an unknown field. */
uint32_t dp_abi_tensor_offset(int32_t field);

/* The name of a status (e.g. "DP_ERR_LAYOUT"), "" for an unknown one. */
const char *dp_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif /* DUMP_PROBE_H */
