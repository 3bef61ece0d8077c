/* Bad calls, each answered with a status (printed as a fact with dp_last_error), never a crash.
 * Run armed (DUMP_PROBE=1, host backend) so that the checks behind an open window are reached;
 * the test also runs it built with -fsanitize=address,undefined where the toolchain allows. */
#include <stdint.h>

#include "common.h"

int main(void) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[DP_MAX_NDIM + 1], strides[DP_MAX_NDIM + 1];
    for (int k = 0; k <= DP_MAX_NDIM; k++) shape[k] = 1, strides[k] = 1;
    shape[0] = 8;
    view v;
    dp_session *s = NULL;

    /* No session. */
    fact_status(NULL, "null.open_out", dp_open(NULL, 0, 0, NULL));
    fact_status(NULL, "null.arm", dp_arm(NULL, "r", NULL));
    fact_status(NULL, "null.capture", dp_capture(NULL, "x", NULL));
    fact_status(NULL, "null.finish", dp_finish(NULL));
    dp_close(NULL);
    fact_int("null.last_error_is_string", dp_last_error(NULL) != NULL);

    fact_status(s, "open", dp_open(NULL, 0, 0, &s));
    fact_status(s, "arm.null_label", dp_arm(s, NULL, NULL));
    fact_status(s, "arm.newline_label", dp_arm(s, "a\nb", NULL));
    fact_status(s, "arm.metadata_array", dp_arm(s, "r", "[1, 2]"));
    fact_status(s, "arm.metadata_broken", dp_arm(s, "r", "{\"token_ids\": [1,"));
    fact_status(s, "arm", dp_arm(s, "r", "{}"));

    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    fact_status(s, "capture.null_stage", dp_capture(s, NULL, &v.t));
    fact_status(s, "capture.null_tensor", dp_capture(s, "x", NULL));
    fact_status(s, "capture.newline_stage", dp_capture(s, "layers.0\nq", &v.t));
    fact_status(s, "capture.empty_stage", dp_capture(s, "", &v.t));
    fact_status(s, "capture.non_utf8_stage", dp_capture(s, "\xff\xfe", &v.t));

    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    v.t.struct_size = 8;
    fact_status(s, "capture.struct_size", dp_capture(s, "x", &v.t));

    view_init(&v, x, sizeof x, 1, 99, 1, shape, strides, 0);
    fact_status(s, "capture.dtype", dp_capture(s, "x", &v.t));

    view_init(&v, x, sizeof x, 1, DP_FLOAT32, DP_MAX_NDIM + 1, shape, strides, 0);
    fact_status(s, "capture.ndim_17", dp_capture(s, "x", &v.t));
    view_init(&v, x, sizeof x, 1, DP_FLOAT32, -1, shape, strides, 0);
    fact_status(s, "capture.ndim_negative", dp_capture(s, "x", &v.t));

    view_init(&v, x, 0, 1, DP_FLOAT32, 1, shape, strides, 7);
    v.strides[0] = -1;
    fact_status(s, "capture.negative_stride", dp_capture(s, "x", &v.t));

    int64_t huge_shape[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, huge_strides[2] = {1, 1};
    view_init(&v, x, 0, 1, DP_FLOAT32, 2, huge_shape, huge_strides, 0);
    fact_status(s, "capture.span_overflow", dp_capture(s, "x", &v.t));
    int64_t wide_shape[2] = {2, 2}, wide_strides[2] = {INT64_MAX / 2, 1};
    view_init(&v, x, 0, 1, DP_FLOAT32, 2, wide_shape, wide_strides, 0);
    fact_status(s, "capture.stride_overflow", dp_capture(s, "x", &v.t));

    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    v.shape[0] = 9; /* one element beyond storage_bytes */
    fact_status(s, "capture.beyond_storage", dp_capture(s, "x", &v.t));

    view_init(&v, NULL, 0, 1, DP_FLOAT32, 1, shape, strides, 0);
    fact_status(s, "capture.null_data", dp_capture(s, "x", &v.t));
    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    v.t.shape = NULL;
    fact_status(s, "capture.null_shape", dp_capture(s, "x", &v.t));

    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    v.t.device_type = 7;
    fact_status(s, "capture.unknown_device", dp_capture(s, "x", &v.t));
    v.t.device_type = DP_DEVICE_NPU;
    fact_status(s, "capture.npu_on_host_backend", dp_capture(s, "x", &v.t));

    /* A good capture among them, and an empty tensor with NULL data (allowed). */
    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    fact_status(s, "capture.good", dp_capture(s, "x", &v.t));
    int64_t zero[1] = {0};
    view_init(&v, NULL, 0, 0, DP_FLOAT32, 1, zero, strides, 0);
    fact_status(s, "capture.empty", dp_capture(s, "empty", &v.t));
    fact_status(s, "finish", dp_finish(s));
    fact_status(s, "finish.again", dp_finish(s));

    dp_close(s);
    view_init(&v, x, sizeof x, 1, DP_FLOAT32, 1, shape, strides, 0);
    fact_status(s, "closed.arm", dp_arm(s, "r", NULL));
    fact_status(s, "closed.capture", dp_capture(s, "x", &v.t));
    fact_status(s, "closed.finish", dp_finish(s));
    dp_close(s);
    fact_int("closed.close_twice", 0);
    return 0;
}
