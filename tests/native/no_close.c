/* A program that never calls dp_close: argv[1] "finished" finishes its window and returns from
 * main; "armed" leaves the window armed. The probe's exit report says what happened. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    dp_session *s;
    /* rank -1: from $RANK (else 0) */
    fact_status(s, "open", dp_open(NULL, -1, 0, &s));
    float values[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4}, strides[1] = {1};
    view v;
    view_init(&v, values, sizeof values, 1, DP_FLOAT32, 1, shape, strides, 0);
    fact_status(s, "arm", dp_arm(s, "req", NULL));
    fact_status(s, "capture", dp_capture(s, "x", &v.t));
    if (strcmp(argv[1], "finished") == 0) fact_status(s, "finish", dp_finish(s));
    return 0;
}
