/* The native probe's cost per capture (benches/native_probe.sh builds and runs this).
 *
 *   native_probe LIBDIR-unused
 *
 * Disarmed: ns per dp_capture on a session opened without DUMP_PROBE (10M calls).
 * Armed, host backend, float32 tensors of 1 KB, 1 MB and 64 MB: µs per capture, counting its
 * share of dp_finish (statistics and the manifest written, fsync included), against the floor
 * of a plain memcpy of the window's captures into distinct slots plus one read of each (a float
 * sum in double in eight independent lanes, one thread); the manifest's bytes per record and the floor of writing them;
 * and dp_finish's throughput (GB/s: statistics, manifest and fsync) against that read's.
 * Prints one line per measurement and a final RESULT line of key=value pairs. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The floor of one window of `count` captures of n floats: best of `reps` of copying them into
 * `count` distinct slots of one destination (a window's captures must all be held until
 * dp_finish, so for 1 MB and up they stream through memory, not cache), then reading each slot
 * once (a float sum in double in eight lanes, one thread). The destination is touched before the clock starts
 * (warm); `fresh_s` is the same copy into newly malloc'd memory, whose first touch the kernel
 * pays, printed for reference. Per capture: copy_s, read_s, fresh_s. */
static void floors(const float *src, int64_t n, int count, int reps, double *copy_s, double *read_s,
                   double *fresh_s) {
    size_t bytes = (size_t)n * 4;
    *copy_s = *read_s = *fresh_s = 1e30;
    char *dst = malloc(bytes * (size_t)count);
    memset(dst, 0, bytes * (size_t)count);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < count; i++) memcpy(dst + bytes * (size_t)i, src, bytes);
        double t1 = now();
        /* Eight independent sums: one chain would measure the latency of an add (about 3 GB/s
         * here), not a read of the bytes. */
        double lanes[8] = {0};
        for (int i = 0; i < count; i++) {
            const float *slot = (const float *)(dst + bytes * (size_t)i);
            int64_t k = 0;
            for (; k + 8 <= n; k += 8)
                for (int j = 0; j < 8; j++) lanes[j] += (double)slot[k + j];
            for (; k < n; k++) lanes[0] += (double)slot[k];
        }
        double t2 = now();
        double sum = 0;
        for (int j = 0; j < 8; j++) sum += lanes[j];
        sink = sum;
        if ((t1 - t0) / count < *copy_s) *copy_s = (t1 - t0) / count;
        if ((t2 - t1) / count < *read_s) *read_s = (t2 - t1) / count;
    }
    free(dst);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        char *fresh = malloc(bytes * (size_t)count);
        for (int i = 0; i < count; i++) memcpy(fresh + bytes * (size_t)i, src, bytes);
        double t1 = now();
        sink = fresh[bytes * (size_t)count - 1];
        free(fresh);
        if ((t1 - t0) / count < *fresh_s) *fresh_s = (t1 - t0) / count;
    }
}

/* The floor of writing a window's manifest: best of 3 of write() + fsync() of `bytes` bytes into
 * a new file in `dir` (what dp_finish must do at least with the text it made), in seconds. */
static double manifest_floor(const char *dir, size_t bytes) {
    char *text = malloc(bytes + 1);
    memset(text, ' ', bytes);
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/floor-%d.json", dir, r);
        double t0 = now();
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0 || write(fd, text, bytes) != (ssize_t)bytes || fsync(fd) != 0) return -1;
        close(fd);
        double t1 = now();
        unlink(path);
        if (t1 - t0 < best) best = t1 - t0;
    }
    free(text);
    return best;
}

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("BENCH_DIR");
    if (!dir) dir = "/tmp/native_probe_bench";
    char result[4096] = "RESULT";
    float *data = malloc((size_t)(64 << 20));
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
        double copy_s, read_s, fresh_s;
        floors(data, n, count, 3, &copy_s, &read_s, &fresh_s);
        /* Best of 3 windows (10 of the short 1 KB ones), each in a fresh session (one window
         * per session is selected). */
        double best_capture = 1e30, best_finish = 0;
        int rounds = count >= 1000 ? 10 : 3;
        for (int round = 0; round < rounds; round++) {
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
            /* The best window as a whole: its capture and finish shares together. */
            if ((c2 - c0) / count < best_capture + best_finish) {
                best_capture = (c1 - c0) / count;
                best_finish = (c2 - c1) / count;
            }
        }
        char manifest[4200];
        snprintf(manifest, sizeof manifest, "%s/%s-0/rank0/match1-occ1/manifest.json", dir, sizes[k].name);
        struct stat st;
        double record_s = stat(manifest, &st) == 0 ? manifest_floor(dir, (size_t)st.st_size) / count : -1;
        double armed_us = (best_capture + best_finish) * 1e6;
        double floor_us = (copy_s + read_s) * 1e6;
        double bytes = (double)n * 4;
        printf("%-3s: armed %.2f us per capture (dp_capture %.2f + its share of dp_finish %.2f) vs memcpy %.2f + read %.2f = %.2f us floor: %.2fx (memcpy into fresh memory: %.2f us); dp_finish (statistics, manifest, fsync) %.2f GB/s vs read floor %.2f GB/s\n",
               sizes[k].name, armed_us, best_capture * 1e6, best_finish * 1e6, copy_s * 1e6, read_s * 1e6, floor_us,
               armed_us / floor_us, fresh_s * 1e6, bytes / best_finish * 1e-9, bytes / read_s * 1e-9);
        printf("     its record: %.0f bytes of manifest, written + fsynced in %.2f us at the least: armed / (floor + record) %.2fx\n",
               record_s < 0 ? 0.0 : (double)st.st_size / count, record_s * 1e6, armed_us / (floor_us + record_s * 1e6));
        snprintf(result + strlen(result), sizeof result - strlen(result), " record_%s_us=%.2f ratio_with_record_%s=%.2f",
                 sizes[k].name, record_s * 1e6, sizes[k].name, armed_us / (floor_us + record_s * 1e6));
        snprintf(result + strlen(result), sizeof result - strlen(result),
                 " armed_%s_us=%.2f capture_%s_us=%.2f finish_%s_us=%.2f memcpy_%s_us=%.2f read_%s_us=%.2f ratio_%s=%.2f fresh_memcpy_%s_us=%.2f finish_%s_gbps=%.2f read_%s_gbps=%.2f",
                 sizes[k].name, armed_us, sizes[k].name, best_capture * 1e6, sizes[k].name, best_finish * 1e6,
                 sizes[k].name, copy_s * 1e6, sizes[k].name, read_s * 1e6, sizes[k].name, armed_us / floor_us,
                 sizes[k].name, fresh_s * 1e6, sizes[k].name, bytes / best_finish * 1e-9, sizes[k].name, bytes / read_s * 1e-9);
    }
    printf("%s\n", result);
    return 0;
}
