/* A mock libascendcl.so: the ACL entry points the native probe uses, over mock_core.h.
 * Signatures and values as CANN's acl_rt.h declares them (see docs/native_probe.md). */
#include "mock_core.h"

typedef int aclError;
typedef void *aclrtStream;
enum { ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE };
#define ACL_ERROR_RT_PARAM_INVALID 107000

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    *hostPtr = mock_malloc_host(size);
    return *hostPtr ? 0 : 207001;
}
aclError aclrtFreeHost(void *hostPtr) {
    mock_free_host(hostPtr);
    return 0;
}
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, int kind, aclrtStream stream) {
    return mock_enqueue(dst, destMax, src, count, kind == ACL_MEMCPY_DEVICE_TO_HOST, stream) ? ACL_ERROR_RT_PARAM_INVALID : 0;
}
aclError aclrtSynchronizeStream(aclrtStream stream) {
    mock_sync(stream);
    return 0;
}
aclError aclrtGetDeviceCount(uint32_t *count) {
    mock_n_count++;
    *count = (uint32_t)mock_device_count();
    return 0;
}
aclError aclmdlRICaptureGetInfo(aclrtStream stream, int *status, void **modelRI) {
    mock_n_capture_query++;
    *status = stream == mock_capturing_stream ? 1 /* ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE */ : 0;
    *modelRI = NULL;
    return 0;
}
const char *aclGetRecentErrMsg(void) { return "EE1001: mock: the copy was refused"; }
