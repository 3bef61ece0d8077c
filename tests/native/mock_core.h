/* The core of the mock device runtimes (mock_acl.c, mock_cudart.c): "device" memory is host
 * memory, and an asynchronous copy is queued on its stream and performed only when that stream
 * is synchronized, so a probe that read its staging before synchronizing would read zeros.
 * Every entry point is counted; mock_* functions let the C driver read the counts and inject
 * failures. MOCK_DEVICE_COUNT (default 1) is the device count reported. */
#ifndef MOCK_CORE_H
#define MOCK_CORE_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_MAX_COPIES 4096
#define MOCK_MAX_STREAMS 64

typedef struct {
    void *dst;
    const void *src;
    size_t count;
    void *stream;
} mock_copy;

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static mock_copy mock_queue[MOCK_MAX_COPIES];
static int mock_queued;
static void *mock_streams[MOCK_MAX_STREAMS];
static int mock_stream_syncs[MOCK_MAX_STREAMS];
static int mock_nstreams;
static int mock_n_malloc, mock_n_free, mock_n_memcpy, mock_n_sync, mock_n_count, mock_n_capture_query;
static int mock_n_bad_kind, mock_n_bad_destmax, mock_live_allocs;
static long long mock_copied_bytes;
static int mock_fail_at; /* 1-based memcpy call that fails; 0: none */
static void *mock_capturing_stream = (void *)-1;

static int mock_stream_index(void *stream) {
    for (int i = 0; i < mock_nstreams; i++)
        if (mock_streams[i] == stream) return i;
    if (mock_nstreams == MOCK_MAX_STREAMS) return -1;
    mock_streams[mock_nstreams] = stream;
    mock_stream_syncs[mock_nstreams] = 0;
    return mock_nstreams++;
}

static int mock_device_count(void) {
    const char *env = getenv("MOCK_DEVICE_COUNT");
    return env ? atoi(env) : 1;
}

/* 0 on success, 1 when the injected failure hits. */
static int mock_enqueue(void *dst, size_t dst_max, const void *src, size_t count, int kind_ok, void *stream) {
    pthread_mutex_lock(&mock_lock);
    int n = ++mock_n_memcpy;
    if (!kind_ok) mock_n_bad_kind++;
    if (dst_max < count) mock_n_bad_destmax++;
    int fail = (n == mock_fail_at) || mock_queued == MOCK_MAX_COPIES;
    if (!fail) {
        mock_queue[mock_queued++] = (mock_copy){dst, src, count, stream};
        mock_stream_index(stream);
    }
    pthread_mutex_unlock(&mock_lock);
    return fail;
}

static void mock_sync(void *stream) {
    pthread_mutex_lock(&mock_lock);
    mock_n_sync++;
    int at = mock_stream_index(stream);
    if (at >= 0) mock_stream_syncs[at]++;
    int kept = 0;
    for (int i = 0; i < mock_queued; i++) {
        if (mock_queue[i].stream == stream) {
            memcpy(mock_queue[i].dst, mock_queue[i].src, mock_queue[i].count);
            mock_copied_bytes += (long long)mock_queue[i].count;
        } else {
            mock_queue[kept++] = mock_queue[i];
        }
    }
    mock_queued = kept;
    pthread_mutex_unlock(&mock_lock);
}

static void *mock_malloc_host(size_t size) {
    pthread_mutex_lock(&mock_lock);
    mock_n_malloc++;
    mock_live_allocs++;
    pthread_mutex_unlock(&mock_lock);
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1) != 0) return NULL;
    memset(p, 0, size);
    return p;
}

static void mock_free_host(void *p) {
    pthread_mutex_lock(&mock_lock);
    mock_n_free++;
    mock_live_allocs--;
    pthread_mutex_unlock(&mock_lock);
    free(p);
}

/* The driver's side. */
int mock_calls(const char *name) {
    if (!strcmp(name, "malloc_host")) return mock_n_malloc;
    if (!strcmp(name, "free_host")) return mock_n_free;
    if (!strcmp(name, "memcpy_async")) return mock_n_memcpy;
    if (!strcmp(name, "synchronize")) return mock_n_sync;
    if (!strcmp(name, "device_count")) return mock_n_count;
    if (!strcmp(name, "capture_query")) return mock_n_capture_query;
    if (!strcmp(name, "bad_kind")) return mock_n_bad_kind;
    if (!strcmp(name, "bad_destmax")) return mock_n_bad_destmax;
    if (!strcmp(name, "live_allocs")) return mock_live_allocs;
    if (!strcmp(name, "pending_copies")) return mock_queued;
    if (!strcmp(name, "streams")) return mock_nstreams;
    return -1;
}
int mock_syncs_of(void *stream) {
    for (int i = 0; i < mock_nstreams; i++)
        if (mock_streams[i] == stream) return mock_stream_syncs[i];
    return 0;
}
long long mock_copied(void) { return mock_copied_bytes; }
void mock_fail_memcpy_call(int n) { mock_fail_at = n; }
void mock_set_capturing(void *stream) { mock_capturing_stream = stream; }

#endif
