/* Drives the native probe over a mock runtime (mock_acl.c or mock_cudart.c) and prints what
 * the mock counted, as facts.
 *
 *   mock_driver SCENARIO MOCK_PATH npu|cuda
 *
 * copies    five captures on three streams (one the default stream) and one host tensor, then a
 *           second session capturing on one stream: copies, kinds, sizes, synchronizes
 * budget    a 1000-byte budget: captures of 400, 400, 400 and 100 bytes, then a broadcast view of
 *           1000 elements over 4 bytes
 * fail      the second aclrtMemcpyAsync / cudaMemcpyAsync fails
 * graph     the second stream reports that it is being captured into a graph
 * auto      the mock is loaded (dlopen RTLD_GLOBAL) before dp_open with DUMP_PROBE_BACKEND=auto
 * auto-none nothing is loaded before dp_open with DUMP_PROBE_BACKEND=auto
 * auto-real MOCK_PATH is a real runtime (torch's libcudart), loaded before dp_open; only a host
 *           tensor is captured (a made-up stream handle must never reach a real runtime)
 */
#include <dlfcn.h>

#include "common.h"

typedef int (*calls_fn)(const char *);
typedef int (*syncs_fn)(void *);
typedef long long (*copied_fn)(void);
typedef void (*fail_fn)(int);
typedef void (*capturing_fn)(void *);

static void *mock;

static void *sym(const char *name) {
    void *p = dlsym(mock, name);
    if (!p) {
        printf("missing mock symbol %s: %s\n", name, dlerror());
        exit(3);
    }
    return p;
}

static void open_mock(const char *path, int flags) {
    mock = dlopen(path, flags);
    if (!mock) {
        printf("cannot dlopen %s: %s\n", path, dlerror());
        exit(3);
    }
}

static void counts(const char *when) {
    const char *names[] = {"malloc_host", "free_host", "memcpy_async", "synchronize", "capture_query",
                           "bad_kind", "bad_destmax", "live_allocs", "pending_copies", "streams"};
    calls_fn calls = (calls_fn)sym("mock_calls");
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", when, names[i]);
        fact_int(key, calls(names[i]));
    }
    char key[128];
    snprintf(key, sizeof key, "%s.copied_bytes", when);
    fact_int(key, ((copied_fn)sym("mock_copied"))());
}

static void syncs(const char *when, void **streams, int n) {
    for (int i = 0; i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s.syncs_of_stream%d", when, i);
        fact_int(key, ((syncs_fn)sym("mock_syncs_of"))(streams[i]));
    }
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *scenario = argv[1], *path = argv[2];
    const int device = strcmp(argv[3], "cuda") == 0 ? DP_DEVICE_CUDA : DP_DEVICE_NPU;
    /* Stream handles are opaque to the probe; the mock only compares them. */
    void *streams[3] = {(void *)0x1000, (void *)0x2000, NULL};

    float a[32], b[16], small[100], big[100];
    int32_t e[5];
    float host[3] = {7, 8, 9};
    for (int i = 0; i < 32; i++) a[i] = 0.5f * (float)i;
    for (int i = 0; i < 16; i++) b[i] = -(float)i;
    for (int i = 0; i < 5; i++) e[i] = 100 * i;
    for (int i = 0; i < 100; i++) small[i] = big[i] = (float)i;

    if (!strcmp(scenario, "auto") || !strcmp(scenario, "auto-real")) open_mock(path, RTLD_NOW | RTLD_GLOBAL);

    dp_session *s = NULL;
    uint64_t budget = !strcmp(scenario, "budget") ? 1000 : 0;
    fact_status(s, "open", dp_open(NULL, 0, budget, &s));
    if (strncmp(scenario, "auto", 4)) open_mock(path, RTLD_NOW);
    fact_status(s, "arm", dp_arm(s, "req", NULL));

    view v;
    int64_t s48[2] = {4, 8}, t48[2] = {8, 1}, s16[1] = {16}, unit[1] = {1}, s23[2] = {2, 3}, s5[1] = {5},
            s3[1] = {3}, s100[1] = {100}, s25[1] = {25};
    if (!strcmp(scenario, "copies") || !strcmp(scenario, "fail") || !strcmp(scenario, "graph")) {
        if (!strcmp(scenario, "fail")) ((fail_fn)sym("mock_fail_memcpy_call"))(2);
        if (!strcmp(scenario, "graph")) ((capturing_fn)sym("mock_set_capturing"))(streams[1]);
        view_init(&v, a, sizeof a, 1, DP_FLOAT32, 2, s48, t48, 0);
        v.t.device_type = device, v.t.stream = streams[0];
        fact_status(s, "capture.a", dp_capture(s, "a", &v.t));
        view_init(&v, b, sizeof b, 2, DP_FLOAT32, 1, s16, unit, 0);
        v.t.device_type = device, v.t.stream = streams[1];
        fact_status(s, "capture.b", dp_capture(s, "b", &v.t));
        view_init(&v, a, sizeof a, 1, DP_FLOAT32, 2, s23, t48, 2); /* a slice of a: 11 elements of span */
        v.t.device_type = device, v.t.stream = streams[0];
        fact_status(s, "capture.c", dp_capture(s, "c", &v.t));
        view_init(&v, host, sizeof host, 3, DP_FLOAT32, 1, s3, unit, 0); /* host memory: copied now */
        fact_status(s, "capture.host", dp_capture(s, "host", &v.t));
        view_init(&v, e, sizeof e, 4, DP_INT32, 1, s5, unit, 0);
        v.t.device_type = device, v.t.stream = streams[2];
        fact_status(s, "capture.e", dp_capture(s, "e", &v.t));
        counts("captured");
        fact_status(s, "finish", dp_finish(s));
        counts("finished");
        syncs("finished", streams, 3);
        dp_close(s);
        if (!strcmp(scenario, "copies")) {
            /* A second session, one window on stream 0 only: one more synchronize of it. */
            fact_status(s, "open2", dp_open(NULL, 0, 0, &s));
            fact_status(s, "arm2", dp_arm(s, "req", NULL));
            view_init(&v, b, sizeof b, 2, DP_FLOAT32, 1, s16, unit, 0);
            v.t.device_type = device, v.t.stream = streams[0];
            fact_status(s, "capture2.b", dp_capture(s, "b", &v.t));
            fact_status(s, "finish2", dp_finish(s));
            syncs("second", streams, 3);
            dp_close(s);
        }
        counts("closed");
    } else if (!strcmp(scenario, "budget")) {
        const char *names[4] = {"first", "second", "third", "fourth"};
        for (int i = 0; i < 4; i++) {
            view_init(&v, i < 3 ? (void *)big : (void *)small, 400, 10 + i, DP_FLOAT32, 1, i < 3 ? s100 : s25, unit, 0);
            v.t.device_type = device, v.t.stream = streams[0];
            char key[64];
            snprintf(key, sizeof key, "capture.%s", names[i]);
            fact_status(s, key, dp_capture(s, names[i], &v.t));
        }
        /* A broadcast view: 1000 elements (4000 bytes dense) read from a span of 4 bytes. */
        int64_t s1000[1] = {1000}, zero[1] = {0};
        view_init(&v, small, 4, 20, DP_FLOAT32, 1, s1000, zero, 0);
        v.t.device_type = device, v.t.stream = streams[0];
        fact_status(s, "capture.broadcast", dp_capture(s, "broadcast", &v.t));
        counts("captured");
        fact_status(s, "finish", dp_finish(s));
        dp_close(s);
        counts("closed");
    } else if (!strcmp(scenario, "auto") || !strcmp(scenario, "auto-none")) {
        view_init(&v, a, sizeof a, 1, DP_FLOAT32, 2, s48, t48, 0);
        v.t.device_type = device, v.t.stream = streams[0];
        fact_status(s, "capture.device", dp_capture(s, "device", &v.t));
        view_init(&v, host, sizeof host, 3, DP_FLOAT32, 1, s3, unit, 0);
        fact_status(s, "capture.host", dp_capture(s, "host", &v.t));
        fact_status(s, "finish", dp_finish(s));
        dp_close(s);
        if (mock) counts("closed");
    } else if (!strcmp(scenario, "auto-real")) {
        view_init(&v, host, sizeof host, 3, DP_FLOAT32, 1, s3, unit, 0);
        fact_status(s, "capture.host", dp_capture(s, "host", &v.t));
        fact_status(s, "finish", dp_finish(s));
        dp_close(s);
    } else {
        printf("unknown scenario %s\n", scenario);
        return 2;
    }
    return 0;
}
