/* A mock CUDA runtime (libcudart.so.12): the entry points the native probe uses, over
 * mock_core.h. Signatures and values as cuda_runtime_api.h and driver_types.h declare them. */
#include "mock_core.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
#define cudaErrorInvalidValue 1
#define cudaErrorNoDevice 100

cudaError_t cudaMallocHost(void **ptr, size_t size) {
    *ptr = mock_malloc_host(size);
    return *ptr ? 0 : 2;
}
cudaError_t cudaFreeHost(void *ptr) {
    mock_free_host(ptr);
    return 0;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    return mock_enqueue(dst, count, src, count, kind == cudaMemcpyDeviceToHost, stream) ? cudaErrorInvalidValue : 0;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    mock_sync(stream);
    return 0;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, int *status) {
    mock_n_capture_query++;
    *status = stream == mock_capturing_stream ? 1 /* cudaStreamCaptureStatusActive */ : 0;
    return 0;
}
cudaError_t cudaGetDeviceCount(int *count) {
    mock_n_count++;
    *count = mock_device_count();
    return *count > 0 ? 0 : cudaErrorNoDevice;
}
const char *cudaGetErrorString(cudaError_t error) {
    return error == cudaErrorInvalidValue ? "invalid argument" : error == cudaErrorNoDevice ? "no CUDA-capable device is detected" : "mock error";
}
