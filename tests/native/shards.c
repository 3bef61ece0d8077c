/* Shard annotations on the host backend: `shards full` captures whole float64 tensors as rank 0;
 * `shards tp` captures the same tensors sliced over a group of 2 as ranks 0 and 1 (two sessions
 * of one process, DUMP_PROBE_RANKS=all), with dp_tensor.shard saying how each slice lies in the
 * full tensor, so that tests/native_probe.rs can check that the slices' position checksums add
 * up to the full ones and that `dumpview diff` across the layouts agrees.
 *
 * Tensors: X [6, 8] (col: tp:1, row: tp:0, uneven: tp:0@OFFSET/6 as rows 0..4 | 4..6), Y [2, 4, 3]
 * (mid: tp:1, a middle dimension), Z [8, 2] (zig: tp:0:zigzag, the zigzag form of context parallel over the same group), and `bad` (tp:5 on a 2-d
 * tensor: a warning, kept without a shard), `neg` (tp:-1, recorded as tp:1) and `typo` (TP:0: a
 * warning, kept without a shard). The layout also names an axis "xp", left out with a warning. */
#include "common.h"

static double X[48], Y[24], Z[16];

static void capture(dp_session *s, const char *stage, const void *data, uint64_t bytes, int32_t ndim,
                    const int64_t *shape, const int64_t *strides, int64_t offset, const char *shard) {
    view v;
    view_init(&v, data, bytes, (uint64_t)(uintptr_t)data, DP_FLOAT64, ndim, shape, strides, offset);
    v.t.shard = shard;
    int status = dp_capture(s, stage, &v.t);
    if (status != DP_OK) {
        printf("fact capture.%s %d %s\n", stage, status, dp_last_error(s));
    }
}

static void full(const char *dir) {
    dp_session *s = NULL;
    dp_open(dir, 0, 1 << 20, &s);
    dp_arm(s, "step", NULL);
    capture(s, "col", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    capture(s, "row", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    capture(s, "uneven", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    capture(s, "mid", Y, sizeof Y, 3, (int64_t[]){2, 4, 3}, (int64_t[]){12, 3, 1}, 0, NULL);
    capture(s, "zig", Z, sizeof Z, 2, (int64_t[]){8, 2}, (int64_t[]){2, 1}, 0, NULL);
    capture(s, "bad", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    capture(s, "neg", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    capture(s, "typo", X, sizeof X, 2, (int64_t[]){6, 8}, (int64_t[]){8, 1}, 0, NULL);
    fact_status(s, "finish.full", dp_finish(s));
    dp_close(s);
}

static void rank(const char *dir, int r) {
    dp_session *s = NULL;
    dp_open(dir, r, 1 << 20, &s);
    char metadata[128];
    /* "xp" is no axis: left out of the recorded layout, with a warning. */
    snprintf(metadata, sizeof metadata, "{\"parallel\": {\"tp\": [%d, 2], \"xp\": [0, 1]}}", r);
    dp_arm(s, "step", metadata);
    /* Columns r*4 .. r*4+4 and rows r*3 .. r*3+3 of X: views into the full buffer. */
    capture(s, "col", X, sizeof X, 2, (int64_t[]){6, 4}, (int64_t[]){8, 1}, r * 4, "tp:1");
    capture(s, "row", X, sizeof X, 2, (int64_t[]){3, 8}, (int64_t[]){8, 1}, r * 24, "tp:0");
    /* Uneven rows: rank 0 holds 0..4, rank 1 holds 4..6. */
    if (r == 0) {
        capture(s, "uneven", X, sizeof X, 2, (int64_t[]){4, 8}, (int64_t[]){8, 1}, 0, "tp:0@0/6");
    } else {
        capture(s, "uneven", X, sizeof X, 2, (int64_t[]){2, 8}, (int64_t[]){8, 1}, 32, "tp:0@4/6");
    }
    /* Y[:, r*2 : r*2+2, :]. */
    capture(s, "mid", Y, sizeof Y, 3, (int64_t[]){2, 2, 3}, (int64_t[]){12, 3, 1}, r * 6, "tp:1");
    /* Zigzag over 2 ranks: chunks of 2 rows; rank r holds chunks r and 3 - r, copied together. */
    double zig[8];
    memcpy(zig, Z + 2 * 2 * r, 4 * sizeof(double));
    memcpy(zig + 4, Z + 2 * 2 * (3 - r), 4 * sizeof(double));
    capture(s, "zig", zig, sizeof zig, 2, (int64_t[]){4, 2}, (int64_t[]){2, 1}, 0, "tp:0:zigzag");
    capture(s, "bad", X, sizeof X, 2, (int64_t[]){3, 8}, (int64_t[]){8, 1}, r * 24, "tp:5");
    /* As dump_probe.py takes them: D from the end (recorded as tp:1), and a typo kept per rank. */
    capture(s, "neg", X, sizeof X, 2, (int64_t[]){6, 4}, (int64_t[]){8, 1}, r * 4, "tp:-1");
    capture(s, "typo", X, sizeof X, 2, (int64_t[]){3, 8}, (int64_t[]){8, 1}, r * 24, "TP:0");
    char name[32];
    snprintf(name, sizeof name, "finish.rank%d", r);
    fact_status(s, name, dp_finish(s));
    dp_close(s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: shards DIR full|tp\n");
        return 2;
    }
    /* Values with distinct magnitudes per position, so a misplaced element changes the checksum. */
    for (int i = 0; i < 48; i++) X[i] = (double)((i * 37) % 23) - 11.5 + i * 0.125;
    for (int i = 0; i < 24; i++) Y[i] = (double)((i * 11) % 7) * 1.5 - 4.0 + i * 0.25;
    for (int i = 0; i < 16; i++) Z[i] = (double)((i * 5) % 9) - 3.25 + i * 0.5;
    if (strcmp(argv[2], "full") == 0) {
        full(argv[1]);
    } else {
        rank(argv[1], 0);
        rank(argv[1], 1);
    }
    return 0;
}
