/* Captures, with the native probe, the views python_side.py described: one line per view in
 * DIR/views.txt ("stage dtype ndim sizes... strides... storage_offset storage_bytes storage_id
 * file"), the storage's bytes in DIR/<file>. Label and metadata as python_side.py armed them. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/views.txt", argv[1]);
    FILE *list = fopen(path, "r");
    if (!list) {
        printf("cannot open %s\n", path);
        return 2;
    }
    dp_session *s = NULL;
    fact_status(s, "open", dp_open(NULL, 0, 0, &s));
    fact_status(s, "arm", dp_arm(s, "same-values", "{\"token_ids\": [5, 6, 7]}"));
    char stage[512], file[512];
    int dtype, ndim;
    while (fscanf(list, "%511s %d %d", stage, &dtype, &ndim) == 3) {
        int64_t shape[DP_MAX_NDIM], strides[DP_MAX_NDIM], offset;
        unsigned long long bytes, id;
        for (int k = 0; k < ndim; k++) fscanf(list, "%lld", (long long *)&shape[k]);
        for (int k = 0; k < ndim; k++) fscanf(list, "%lld", (long long *)&strides[k]);
        if (fscanf(list, "%lld %llu %llu %511s", (long long *)&offset, &bytes, &id, file) != 4) return 2;
        snprintf(path, sizeof path, "%s/%s", argv[1], file);
        FILE *f = fopen(path, "rb");
        void *data = malloc(bytes ? bytes : 1);
        if (!f || !data || fread(data, 1, bytes, f) != bytes) {
            printf("cannot read %s\n", path);
            return 2;
        }
        fclose(f);
        view v;
        view_init(&v, data, bytes, id, dtype, ndim, shape, strides, offset);
        char key[600];
        snprintf(key, sizeof key, "capture.%s", stage);
        fact_status(s, key, dp_capture(s, stage, &v.t));
        /* Freed before dp_finish: the host backend copied the span in dp_capture. */
        free(data);
    }
    fclose(list);
    fact_status(s, "finish", dp_finish(s));
    dp_close(s);
    return 0;
}
