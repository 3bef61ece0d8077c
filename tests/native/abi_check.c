/* The header against the library: every constant, every status name, the struct's size and
 * each field's offset, and every function called once. Prints "mismatch ..." lines and exits 1
 * when something differs; prints "abi ok N" when all N checks pass. */
#include <stddef.h>
#include <stdint.h>

#include "common.h"

static int checks, failures;

static void same_int(const char *what, long long header, long long library) {
    checks++;
    if (header != library) {
        failures++;
        printf("mismatch %s: header %lld, library %lld\n", what, header, library);
    }
}

static void same_name(int status, const char *header_name) {
    checks++;
    const char *library_name = dp_status_name(status);
    if (strcmp(library_name, header_name) != 0) {
        failures++;
        printf("mismatch status %d: header %s, library %s\n", status, header_name, library_name);
    }
}

int main(void) {
    same_int("DP_ABI_VERSION", DP_ABI_VERSION, dp_abi_constant(DP_ABI_KEY_VERSION));
    same_int("DP_MAX_NDIM", DP_MAX_NDIM, dp_abi_constant(DP_ABI_KEY_MAX_NDIM));
    same_int("DP_DEFAULT_BUDGET_BYTES", (long long)DP_DEFAULT_BUDGET_BYTES, dp_abi_constant(DP_ABI_KEY_DEFAULT_BUDGET));
    same_int("dtype count (DP_BOOL + 1)", DP_BOOL + 1, dp_abi_constant(DP_ABI_KEY_DTYPE_COUNT));
    same_int("device count (DP_DEVICE_CUDA + 1)", DP_DEVICE_CUDA + 1, dp_abi_constant(DP_ABI_KEY_DEVICE_COUNT));
    same_int("most negative status", DP_ERR_INTERNAL, dp_abi_constant(DP_ABI_KEY_STATUS_MIN));
    same_int("unknown key", INT64_MIN, dp_abi_constant(999));
    /* The dtype codes are consecutive from DP_FLOAT32 = 0 in the header's order. */
    const int dtypes[] = {DP_FLOAT32, DP_FLOAT16, DP_BFLOAT16, DP_FLOAT64, DP_FLOAT8_E4M3FN, DP_FLOAT8_E5M2,
                          DP_INT8, DP_INT16, DP_INT32, DP_INT64, DP_UINT8, DP_BOOL};
    for (int i = 0; i < (int)(sizeof dtypes / sizeof dtypes[0]); i++) same_int("dtype code", i, dtypes[i]);
    same_int("DP_DEVICE_HOST", 0, DP_DEVICE_HOST);
    same_int("DP_DEVICE_NPU", 1, DP_DEVICE_NPU);
    same_int("DP_DEVICE_CUDA", 2, DP_DEVICE_CUDA);

    same_name(DP_OK, "DP_OK");
    same_name(DP_ERR_NULL_ARGUMENT, "DP_ERR_NULL_ARGUMENT");
    same_name(DP_ERR_STRUCT_SIZE, "DP_ERR_STRUCT_SIZE");
    same_name(DP_ERR_DTYPE, "DP_ERR_DTYPE");
    same_name(DP_ERR_NDIM, "DP_ERR_NDIM");
    same_name(DP_ERR_LAYOUT, "DP_ERR_LAYOUT");
    same_name(DP_ERR_NAME, "DP_ERR_NAME");
    same_name(DP_ERR_METADATA, "DP_ERR_METADATA");
    same_name(DP_ERR_DEVICE, "DP_ERR_DEVICE");
    same_name(DP_ERR_OVER_BUDGET, "DP_ERR_OVER_BUDGET");
    same_name(DP_ERR_GRAPH_CAPTURE, "DP_ERR_GRAPH_CAPTURE");
    same_name(DP_ERR_RUNTIME, "DP_ERR_RUNTIME");
    same_name(DP_ERR_IO, "DP_ERR_IO");
    same_name(DP_ERR_CONFIG, "DP_ERR_CONFIG");
    same_name(DP_ERR_BACKEND, "DP_ERR_BACKEND");
    same_name(DP_ERR_CLOSED, "DP_ERR_CLOSED");
    same_name(DP_ERR_INTERNAL, "DP_ERR_INTERNAL");
    same_name(1, "");
    same_name(DP_ERR_INTERNAL - 1, "");

    same_int("sizeof(dp_tensor)", sizeof(dp_tensor), dp_abi_tensor_size());
    const size_t offsets[] = {
        offsetof(dp_tensor, struct_size), offsetof(dp_tensor, data),           offsetof(dp_tensor, storage_bytes),
        offsetof(dp_tensor, storage_id),  offsetof(dp_tensor, dtype),          offsetof(dp_tensor, ndim),
        offsetof(dp_tensor, shape),       offsetof(dp_tensor, strides),        offsetof(dp_tensor, storage_offset),
        offsetof(dp_tensor, device_type), offsetof(dp_tensor, device_index),   offsetof(dp_tensor, stream),
        offsetof(dp_tensor, shard),
    };
    for (int f = 0; f < 13; f++) {
        char what[64];
        snprintf(what, sizeof what, "offset of dp_tensor field %d", f);
        same_int(what, (long long)offsets[f], dp_abi_tensor_offset(f));
    }
    same_int("offset of an unknown field", UINT32_MAX, dp_abi_tensor_offset(13));

    /* Every function, once, on a disarmed session (the test runs this without DUMP_PROBE). */
    dp_session *s = NULL;
    float x[2] = {1, 2};
    int64_t shape[1] = {2}, strides[1] = {1};
    view v;
    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    same_int("dp_open", DP_OK, dp_open(NULL, 0, 0, &s));
    same_int("dp_open gives a session", 1, s != NULL);
    same_int("dp_arm", DP_OK, dp_arm(s, "r", NULL));
    same_int("dp_capture", DP_OK, dp_capture(s, "x", &v.t));
    same_int("dp_finish", DP_OK, dp_finish(s));
    same_int("dp_last_error is empty", 0, (long long)strlen(dp_last_error(s)));
    dp_close(s);

    printf("abi %s %d\n", failures ? "FAILED" : "ok", checks);
    return failures ? 1 : 0;
}
