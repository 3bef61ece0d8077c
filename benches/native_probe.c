/* The native probe's cost per capture (benches/native_probe.sh builds and runs this).
 *
 *   native_probe LIBDIR-unused
 *
 * Disarmed: ns per dp_capture on a session opened without DUMP_PROBE (10M calls).
 * Armed, host backend, float32 tensors of 1 KB, 1 MB and 64 MB: µs per capture, counting its
 * share of dp_finish (statistics and the manifest written, fsync included), against the floor
 * of a plain memcpy of the same bytes plus one read of them (a float sum in double, one
 * thread), and the statistics' throughput (GB/s) against that read's.
 * Prints one line per measurement and a final RESULT line of key=value pairs. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dump_probe.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static dp_tensor tensor(float *data, int64_t *shape, int64_t *strides, int64_t n) {
    shape[0] = n / 256 > 0 ? n / 256 : 1;
    shape[1] = n / shape[0];
    strides[0] = shape[1];
    strides[1] = 1;
    dp_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.data = data;
    t.storage_bytes = (uint64_t)n * 4;
    t.storage_id = 1;
    t.dtype = DP_FLOAT32;
    t.ndim = 2;
    t.shape = shape;
    t.strides = strides;
    t.device_type = DP_DEVICE_HOST;
    return t;
}

static volatile double sink;

/* Best of `reps` of: copy n floats, then read them once. Returns (memcpy s, read s). */
static void floors(const float *src, float *dst, int64_t n, int reps, double *copy_s, double *read_s) {
    *copy_s = *read_s = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        memcpy(dst, src, (size_t)n * 4);
        double t1 = now();
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += (double)dst[i];
        double t2 = now();
        sink = sum;
        if (t1 - t0 < *copy_s) *copy_s = t1 - t0;
        if (t2 - t1 < *read_s) *read_s = t2 - t1;
    }
}

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("BENCH_DIR");
    if (!dir) dir = "/tmp/native_probe_bench";
    char result[2048] = "RESULT";
    float *data = malloc((size_t)(64 << 20));
    float *copy = malloc((size_t)(64 << 20));
    for (int64_t i = 0; i < (16 << 20); i++) data[i] = (float)((i * 7919) % 2003) * 0.01f - 10.0f;
    int64_t shape[2], strides[2];

    /* Disarmed. */
    unsetenv("DUMP_PROBE");
    dp_session *s = NULL;
    dp_open(dir, 0, 0, &s);
    dp_arm(s, "r", NULL);
    dp_tensor t = tensor(data, shape, strides, 256);
    const long calls = 10000000;
    double t0 = now();
    for (long i = 0; i < calls; i++) dp_capture(s, "layers.0.out", &t);
    double disarmed_ns = (now() - t0) / (double)calls * 1e9;
    dp_close(s);
    printf("disarmed: %.2f ns per dp_capture (%ld calls)\n", disarmed_ns, calls);
    snprintf(result + strlen(result), sizeof result - strlen(result), " disarmed_ns=%.2f", disarmed_ns);

    /* Armed, host backend. */
    setenv("DUMP_PROBE", "1", 1);
    setenv("DUMP_PROBE_BACKEND", "host", 1);
    struct { const char *name; int64_t floats; int captures; } sizes[] = {
        {"1k", 256, 4000}, {"1m", 256 * 1024, 200}, {"64m", 16 << 20, 6}};
    for (int k = 0; k < 3; k++) {
        int64_t n = sizes[k].floats;
        int count = sizes[k].captures;
        double copy_s, read_s;
        floors(data, copy, n, count < 20 ? 5 : 20, &copy_s, &read_s);
        /* Best of 3 windows, each in a fresh session (one window per session is selected). */
        double best_capture = 1e30, best_finish = 1e30;
        for (int round = 0; round < 3; round++) {
            char window_dir[4096];
            snprintf(window_dir, sizeof window_dir, "%s/%s-%d", dir, sizes[k].name, round);
            setenv("DUMP_PROBE_DIR", window_dir, 1);
            dp_open(dir, 0, (uint64_t)count * (uint64_t)n * 4 + (1 << 20), &s);
            dp_arm(s, "bench", NULL);
            t = tensor(data, shape, strides, n);
            double c0 = now();
            for (int i = 0; i < count; i++) {
                if (dp_capture(s, "x", &t) != DP_OK) {
                    printf("capture failed: %s\n", dp_last_error(s));
                    return 1;
                }
            }
            double c1 = now();
            if (dp_finish(s) != DP_OK) {
                printf("finish failed: %s\n", dp_last_error(s));
                return 1;
            }
            double c2 = now();
            dp_close(s);
            if ((c1 - c0) / count < best_capture) best_capture = (c1 - c0) / count;
            if ((c2 - c1) / count < best_finish) best_finish = (c2 - c1) / count;
        }
        double armed_us = (best_capture + best_finish) * 1e6;
        double floor_us = (copy_s + read_s) * 1e6;
        double bytes = (double)n * 4;
        printf("%-3s: armed %.2f us per capture (dp_capture %.2f + its share of dp_finish %.2f) vs memcpy %.2f + read %.2f = %.2f us floor: %.2fx; statistics %.2f GB/s vs read floor %.2f GB/s\n",
               sizes[k].name, armed_us, best_capture * 1e6, best_finish * 1e6, copy_s * 1e6, read_s * 1e6, floor_us,
               armed_us / floor_us, bytes / best_finish * 1e-9, bytes / read_s * 1e-9);
        snprintf(result + strlen(result), sizeof result - strlen(result),
                 " armed_%s_us=%.2f capture_%s_us=%.2f finish_%s_us=%.2f memcpy_%s_us=%.2f read_%s_us=%.2f ratio_%s=%.2f stats_%s_gbps=%.2f read_%s_gbps=%.2f",
                 sizes[k].name, armed_us, sizes[k].name, best_capture * 1e6, sizes[k].name, best_finish * 1e6,
                 sizes[k].name, copy_s * 1e6, sizes[k].name, read_s * 1e6, sizes[k].name, armed_us / floor_us,
                 sizes[k].name, bytes / best_finish * 1e-9, sizes[k].name, bytes / read_s * 1e-9);
    }
    printf("%s\n", result);
    return 0;
}
