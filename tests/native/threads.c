/* One session shared by 8 threads, each capturing its own stage 100 times while the others do
 * (the host backend); then one dp_finish. Prints each thread's failures and the finish status. */
#include <pthread.h>

#include "common.h"

#define THREADS 8
#define CAPTURES 100

static dp_session *session;

static void *worker(void *arg) {
    long k = (long)arg;
    float values[64];
    for (int i = 0; i < 64; i++) values[i] = (float)(k * 1000 + i);
    int64_t shape[2] = {8, 8}, strides[2] = {8, 1};
    char stage[32];
    snprintf(stage, sizeof stage, "thread%ld", k);
    long failures = 0;
    for (int n = 0; n < CAPTURES; n++) {
        view v;
        view_init(&v, values, sizeof values, (uint64_t)k + 1, DP_FLOAT32, 2, shape, strides, 0);
        if (dp_capture(session, stage, &v.t) != DP_OK) failures++;
        if (n % 10 == 0) (void)dp_last_error(session);
    }
    return (void *)failures;
}

int main(void) {
    fact_status(session, "open", dp_open(NULL, 0, 0, &session));
    fact_status(session, "arm", dp_arm(session, "threads", NULL));
    pthread_t threads[THREADS];
    for (long k = 0; k < THREADS; k++) pthread_create(&threads[k], NULL, worker, (void *)k);
    long failures = 0;
    for (int k = 0; k < THREADS; k++) {
        void *result;
        pthread_join(threads[k], &result);
        failures += (long)result;
    }
    fact_int("failures", failures);
    fact_status(session, "finish", dp_finish(session));
    dp_close(session);
    return 0;
}
