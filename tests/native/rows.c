/* Token rows through the native ABI (dp_arm_rows, dp_capture_rows), on the host backend.
 *
 *   rows map DIR       one window whose row map is r1 at positions 4-5, one padding row, r0 at
 *                      0-2 (token ids given); captures H [6, 8] float32 (auto: token rows), IDS
 *                      [6] int64 (auto), W [3, 8] (3 rows: none), S [2, 3, 8] (DP_ROWS_TOKENS_2D),
 *                      H again as DP_ROWS_NONE, and H[:5] declared DP_ROWS_TOKENS (does not fit:
 *                      a warning); then prints dp_row_stats of H at the map's positions as
 *                      "fact row.N HEX" (the five float32 bits of row N), for the Rust test to
 *                      compare with the sidecar bit for bit.
 *   rows whole DIR     request "req" at positions 0-5 in one window: stages h = H, q = 2 H.
 *   rows chunk DIR     the same request in two chunks (0-2, 3-5), two calls of label "req":
 *                      DUMP_PROBE_OCCURRENCE selects which (1, 2, or all for a window each).
 *   rows bug DIR       as chunk, with one value of the second chunk's q changed.
 *   rows counted DIR   dp_arm without a map over three calls of label "gen" (5 rows, then 1, 1):
 *                      the positions counted on, captured or not.
 *   rows bad DIR       dp_arm_rows with a negative count: DP_ERR_METADATA, the window opens
 *                      without a row map.
 *   rows huge DIR      counts of 2^62 rows and n_rows of 2^40: refused, the process lives.
 *   rows tp DIR        request "req" at positions 0-5 over a tp group of 2 (two sessions, ranks 0
 *                      and 1, DUMP_PROBE_RANKS=all): h and q as column slices [6, 4] ("tp:1"),
 *                      whose rows dumpview merges into the whole run's. */
#include "common.h"

_Static_assert(sizeof(dp_rows_entry) == 40, "dp_rows_entry is five 8-byte fields");

static float H[48], Q[48], S[48];
static int64_t IDS[6] = {11, 12, 13, 14, 15, 16};

static void fill(void) {
    for (int i = 0; i < 48; i++) {
        H[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
        Q[i] = 2.0f * H[i];
        S[i] = (float)((i * 11) % 17) / 5.0f;
    }
}

static int capture(dp_session *s, const char *stage, const void *data, uint64_t bytes, int32_t dtype, int32_t ndim,
                   const int64_t *shape, const int64_t *strides, int32_t rows) {
    view v;
    view_init(&v, data, bytes, (uint64_t)(uintptr_t)data, dtype, ndim, shape, strides, 0);
    return dp_capture_rows(s, stage, &v.t, rows);
}

static void map(const char *dir) {
    dp_session *s = NULL;
    dp_open(dir, 0, 1 << 20, &s);
    int64_t r0_ids[3] = {101, 102, 103};
    dp_rows_entry rows[3] = {
        {"r1", 4, 2, NULL, NULL},
        {NULL, 0, 1, NULL, NULL},
        {"r0", 0, 3, NULL, r0_ids},
    };
    fact_status(s, "arm", dp_arm_rows(s, "batch", NULL, rows, 3));
    int64_t shape[3] = {6, 8}, strides[2] = {8, 1};
    fact_status(s, "capture.h", capture(s, "h", H, sizeof H, DP_FLOAT32, 2, shape, strides, DP_ROWS_AUTO));
    fact_status(s, "capture.ids",
                capture(s, "ids", IDS, sizeof IDS, DP_INT64, 1, (int64_t[]){6}, (int64_t[]){1}, DP_ROWS_AUTO));
    fact_status(s, "capture.w",
                capture(s, "w", H, sizeof H, DP_FLOAT32, 2, (int64_t[]){3, 8}, strides, DP_ROWS_AUTO));
    fact_status(s, "capture.s",
                capture(s, "s", S, sizeof S, DP_FLOAT32, 3, (int64_t[]){2, 3, 8}, (int64_t[]){24, 8, 1},
                        DP_ROWS_TOKENS_2D));
    fact_status(s, "capture.none", capture(s, "h_none", H, sizeof H, DP_FLOAT32, 2, shape, strides, DP_ROWS_NONE));
    fact_status(s, "capture.short",
                capture(s, "h_short", H, sizeof H, DP_FLOAT32, 2, (int64_t[]){5, 8}, strides, DP_ROWS_TOKENS));
    fact_status(s, "capture.badmode", capture(s, "h_bad", H, sizeof H, DP_FLOAT32, 2, shape, strides, 9));
    fact_status(s, "finish", dp_finish(s));
    /* The rows dp_row_stats gives H at the map's positions (padding: -1). */
    view v;
    view_init(&v, H, sizeof H, 0, DP_FLOAT32, 2, shape, strides, 0);
    int64_t positions[6] = {4, 5, -1, 0, 1, 2};
    float out[30];
    fact_status(s, "row_stats", dp_row_stats(&v.t, 6, positions, out));
    for (int r = 0; r < 6; r++) {
        printf("fact row.%d", r);
        for (int k = 0; k < 5; k++) {
            uint32_t bits;
            memcpy(&bits, &out[r * 5 + k], 4);
            printf(" %08x", bits);
        }
        printf("\n");
    }
    dp_close(s);
}

/* Rows first..first+count of request "req": stages h and q (q's value at `bug` changed). */
static void forward(dp_session *s, int64_t first, int64_t count, int bug) {
    dp_rows_entry rows[1] = {{"req", first, count, NULL, IDS + first}};
    int status = dp_arm_rows(s, "req", NULL, rows, 1);
    if (status != DP_OK) {
        fact_status(s, "arm", status);
    }
    static float q[48];
    memcpy(q, Q, sizeof q);
    if (bug && first == 3) {
        q[(4 * 8) + 5] += 0.75f; /* position 4, column 5 */
    }
    int64_t shape[2] = {count, 8}, strides[2] = {8, 1};
    view v;
    view_init(&v, H + first * 8, (uint64_t)count * 32, 1, DP_FLOAT32, 2, shape, strides, 0);
    dp_capture(s, "h", &v.t);
    view_init(&v, q + first * 8, (uint64_t)count * 32, 2, DP_FLOAT32, 2, shape, strides, 0);
    dp_capture(s, "q", &v.t);
    dp_finish(s);
}

/* Rank r of a tp group of 2: columns r*4 .. r*4+4 of h = H and q = 2 H, as views. */
static void tp_rank(const char *dir, int r) {
    dp_session *s = NULL;
    dp_open(dir, r, 1 << 20, &s);
    char metadata[64];
    snprintf(metadata, sizeof metadata, "{\"parallel\": {\"tp\": [%d, 2]}}", r);
    dp_rows_entry rows[1] = {{"req", 0, 6, NULL, IDS}};
    fact_status(s, r == 0 ? "arm.0" : "arm.1", dp_arm_rows(s, "req", metadata, rows, 1));
    int64_t shape[2] = {6, 4}, strides[2] = {8, 1};
    view v;
    view_init(&v, H, sizeof H, 1, DP_FLOAT32, 2, shape, strides, r * 4);
    v.t.shard = "tp:1";
    fact_status(s, r == 0 ? "capture.h.0" : "capture.h.1", dp_capture(s, "h", &v.t));
    view_init(&v, Q, sizeof Q, 2, DP_FLOAT32, 2, shape, strides, r * 4);
    v.t.shard = "tp:1";
    dp_capture(s, "q", &v.t);
    dp_finish(s);
    dp_close(s);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rows map|whole|chunk|bug|bad DIR [K]\n");
        return 2;
    }
    fill();
    const char *which = argv[1], *dir = argv[2];
    if (!strcmp(which, "map")) {
        map(dir);
        return 0;
    }
    if (!strcmp(which, "tp")) {
        tp_rank(dir, 0);
        tp_rank(dir, 1);
        return 0;
    }
    dp_session *s = NULL;
    dp_open(dir, 0, 1 << 20, &s);
    if (!strcmp(which, "whole")) {
        forward(s, 0, 6, 0);
    } else if (!strcmp(which, "chunk") || !strcmp(which, "bug")) {
        /* Both calls are made; DUMP_PROBE_OCCURRENCE picks the one this run writes. */
        forward(s, 0, 3, 0);
        forward(s, 3, 3, !strcmp(which, "bug"));
    } else if (!strcmp(which, "huge")) {
        /* Counts from C are input: a map beyond the bound is refused, never allocated. */
        dp_rows_entry huge[2] = {{"a", 0, (int64_t)1 << 62, NULL, NULL}, {"b", 0, (int64_t)1 << 62, NULL, NULL}};
        fact_status(s, "arm.count", dp_arm_rows(s, "huge", NULL, huge, 2));
        dp_finish(s);
        /* n_rows far beyond the entries given: refused before one is read (a later call of
         * the label: not selected, so DP_OK, and no abort). */
        fact_status(s, "arm.n_rows", dp_arm_rows(s, "huge", NULL, huge, (uint64_t)1 << 40));
    } else if (!strcmp(which, "counted")) {
        /* dp_arm without a map, as a generate loop arms: a prompt of 5 rows, then two steps of
         * one, each [1, n, 8] (DP_ROWS_TOKENS_2D) after a [8] capture without rows; positions
         * are counted on over the calls, captured or not (DUMP_PROBE_OCCURRENCE picks). */
        int64_t strides[3] = {40, 8, 1};
        const int64_t steps[3] = {5, 1, 1};
        for (int call = 0; call < 3; call++) {
            dp_arm(s, "gen", NULL);
            view v;
            int64_t flat[1] = {8}, one[1] = {1};
            view_init(&v, S, 8 * sizeof(float), 1, DP_FLOAT32, 1, flat, one, 0);
            dp_capture_rows(s, "bias", &v.t, DP_ROWS_NONE);
            int64_t shape[3] = {1, steps[call], 8};
            view_init(&v, H, (uint64_t)steps[call] * 8 * sizeof(float), 1, DP_FLOAT32, 3, shape, strides, 0);
            fact_status(s, call == 0 ? "capture.0" : call == 1 ? "capture.1" : "capture.2",
                        dp_capture_rows(s, "h", &v.t, DP_ROWS_TOKENS_2D));
            dp_finish(s);
        }
    } else if (!strcmp(which, "bad")) {
        dp_rows_entry rows[1] = {{"req", 0, -1, NULL, NULL}};
        fact_status(s, "arm", dp_arm_rows(s, "req", NULL, rows, 1));
        int64_t shape[2] = {6, 8}, strides[2] = {8, 1};
        view v;
        view_init(&v, H, sizeof H, 1, DP_FLOAT32, 2, shape, strides, 0);
        fact_status(s, "capture", dp_capture(s, "h", &v.t));
        fact_status(s, "finish", dp_finish(s));
    }
    dp_close(s);
    return 0;
}
