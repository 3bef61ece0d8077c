/* Helpers shared by the C drivers of tests/native_probe.rs: building a dp_tensor, and printing
 * facts ("fact NAME VALUE" lines) that the Rust test reads and asserts on. */
#ifndef NATIVE_TEST_COMMON_H
#define NATIVE_TEST_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_probe.h"

/* A view of `data` with up to 4 dimensions. */
typedef struct view {
    dp_tensor t;
    int64_t shape[DP_MAX_NDIM + 1];
    int64_t strides[DP_MAX_NDIM + 1];
} view;

static inline void view_init(view *v, const void *data, uint64_t storage_bytes, uint64_t storage_id, int32_t dtype,
                      int32_t ndim, const int64_t *shape, const int64_t *strides, int64_t offset) {
    memset(v, 0, sizeof *v);
    v->t.struct_size = sizeof(dp_tensor);
    v->t.data = data;
    v->t.storage_bytes = storage_bytes;
    v->t.storage_id = storage_id;
    v->t.dtype = dtype;
    v->t.ndim = ndim;
    for (int k = 0; k < ndim && k <= DP_MAX_NDIM; k++) {
        v->shape[k] = shape[k];
        v->strides[k] = strides[k];
    }
    v->t.shape = v->shape;
    v->t.strides = v->strides;
    v->t.storage_offset = offset;
    v->t.device_type = DP_DEVICE_HOST;
}

static inline void fact_int(const char *name, long long value) { printf("fact %s %lld\n", name, value); }

static inline void fact_str(const char *name, const char *value) {
    printf("fact %s ", name);
    for (const char *p = value; *p; p++) putchar(*p == '\n' ? ' ' : *p);
    putchar('\n');
}

/* A call's status and, when it failed, the probe's message. */
static inline void fact_status(dp_session *s, const char *name, int status) {
    char key[1024];
    fact_int(name, status);
    snprintf(key, sizeof key, "%s.error", name);
    fact_str(key, status == DP_OK ? "" : dp_last_error(s));
}

/* bfloat16 bits of a float (round to nearest even; the values used are exact in bfloat16). */
static inline uint16_t bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

#endif
