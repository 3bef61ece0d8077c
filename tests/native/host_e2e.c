/* The host backend end to end: a run "a" and a run "b" of the same nine stages, where b has a
 * divergence (mlp.out scaled by 1.5) and a NaN and an inf (attn.scores). Both hold a transposed
 * view, a strided slice and a column-major misreading of one buffer (a stride conflict), a
 * bfloat16 tensor and a 0-d scalar. Label "warmup" comes first and req-7 is armed twice, so DUMP_PROBE_MATCH=2 selects
 * req-7's first call. Every status is printed as a fact. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
    const int b = argc > 1 && strcmp(argv[1], "b") == 0;
    dp_session *s = NULL;
    fact_status(s, "open", dp_open("/nonexistent-overridden-by-DUMP_PROBE_DIR", 0, 0, &s));

    float junk[3] = {NAN, NAN, NAN};
    int64_t shape3[1] = {3}, unit[1] = {1};
    view v;
    fact_status(s, "arm.warmup", dp_arm(s, "warmup", NULL));
    view_init(&v, junk, sizeof junk, 1, DP_FLOAT32, 1, shape3, unit, 0);
    fact_status(s, "capture.warmup", dp_capture(s, "warmup.only", &v.t));

    fact_status(s, "arm.req7", dp_arm(s, "req-7", "{\"token_ids\": [1, 2, 3], \"temperature\": 0.0}"));

    float embed[32], mlp[32], scores[8], cache[24];
    for (int i = 0; i < 32; i++) {
        embed[i] = 2.0f * sinf((float)i);
        mlp[i] = cosf((float)i) * (b ? 1.5f : 1.0f);
    }
    for (int i = 0; i < 8; i++) scores[i] = 0.25f * (float)i;
    if (b) {
        scores[1] = NAN;
        scores[6] = INFINITY;
    }
    for (int i = 0; i < 24; i++) cache[i] = (float)i - 10.0f;
    uint16_t logits[10];
    for (int i = 0; i < 10; i++) logits[i] = bf16(0.5f * (float)(i - 4));
    double loss = 2.5;

    int64_t s48[2] = {4, 8}, t48[2] = {8, 1};
    view_init(&v, embed, sizeof embed, 1, DP_FLOAT32, 2, s48, t48, 0);
    fact_status(s, "capture.embed", dp_capture(s, "embed.out", &v.t));
    /* A write after the capture must not be seen: the host backend copies in dp_capture. */
    for (int i = 0; i < 32; i++) embed[i] = NAN;

    view_init(&v, mlp, sizeof mlp, 2, DP_FLOAT32, 2, s48, t48, 0);
    fact_status(s, "capture.mlp", dp_capture(s, "mlp.out", &v.t));

    int64_t s24[2] = {2, 4}, t24[2] = {4, 1};
    view_init(&v, scores, sizeof scores, 3, DP_FLOAT32, 2, s24, t24, 0);
    fact_status(s, "capture.scores", dp_capture(s, "attn.scores", &v.t));

    int64_t s64[2] = {6, 4}, t64[2] = {4, 1};
    view_init(&v, cache, sizeof cache, 7, DP_FLOAT32, 2, s64, t64, 0);
    fact_status(s, "capture.cache", dp_capture(s, "kv.cache", &v.t));
    int64_t s46[2] = {4, 6}, t46[2] = {1, 4};
    view_init(&v, cache, sizeof cache, 7, DP_FLOAT32, 2, s46, t46, 0);
    fact_status(s, "capture.cache_t", dp_capture(s, "kv.cache.T", &v.t));
    int64_t s34[2] = {3, 4}, t34[2] = {8, 1};
    view_init(&v, cache, sizeof cache, 7, DP_FLOAT32, 2, s34, t34, 4);
    fact_status(s, "capture.slice", dp_capture(s, "kv.slice", &v.t));

    /* The same [6, 4] read column-major: one logical shape through another address map, the
     * stride conflict scan reports (a transpose, by contrast, is the same layout). */
    int64_t t64m[2] = {1, 6};
    view_init(&v, cache, sizeof cache, 7, DP_FLOAT32, 2, s64, t64m, 0);
    fact_status(s, "capture.misread", dp_capture(s, "kv.misread", &v.t));

    int64_t s25[2] = {2, 5}, t25[2] = {5, 1};
    view_init(&v, logits, sizeof logits, 8, DP_BFLOAT16, 2, s25, t25, 0);
    fact_status(s, "capture.logits", dp_capture(s, "logits", &v.t));

    view_init(&v, &loss, sizeof loss, 9, DP_FLOAT64, 0, NULL, NULL, 0);
    fact_status(s, "capture.loss", dp_capture(s, "loss", &v.t));

    /* The second call of req-7 is not selected (DUMP_PROBE_OCCURRENCE=1): it finishes the window. */
    fact_status(s, "arm.req7.again", dp_arm(s, "req-7", NULL));
    view_init(&v, junk, sizeof junk, 1, DP_FLOAT32, 1, shape3, unit, 0);
    fact_status(s, "capture.again", dp_capture(s, "second.call.only", &v.t));
    fact_status(s, "finish", dp_finish(s));
    dp_close(s);
    return 0;
}
