/* A server that forks workers after a first window: the parent finishes a window of two
 * captures, then a child (with alarm(20) so a hang fails the test instead of stalling it)
 * opens its own session under argv[2] and finishes a window of two. Prints the child's
 * statuses and how it ended. argv[1]: the parent's directory. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static void capture_two(dp_session *s, const char *prefix, const char *who) {
    float values[64];
    for (int i = 0; i < 64; i++) values[i] = (float)i;
    int64_t shape[2] = {8, 8}, strides[2] = {8, 1};
    view v;
    view_init(&v, values, sizeof values, 1, DP_FLOAT32, 2, shape, strides, 0);
    char name[64];
    snprintf(name, sizeof name, "%s.arm", who);
    fact_status(s, name, dp_arm(s, "w", NULL));
    for (int k = 0; k < 2; k++) {
        char stage[32];
        snprintf(stage, sizeof stage, "%s%d", prefix, k);
        snprintf(name, sizeof name, "%s.capture%d", who, k);
        fact_status(s, name, dp_capture(s, stage, &v.t));
    }
    snprintf(name, sizeof name, "%s.finish", who);
    fact_status(s, name, dp_finish(s));
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    dp_session *parent;
    fact_status(parent, "parent.open", dp_open(argv[1], 0, 0, &parent));
    capture_two(parent, "before", "parent");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        dp_session *child;
        fact_status(child, "child.open", dp_open(argv[2], 0, 0, &child));
        capture_two(child, "after", "child");
        dp_close(child);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    fact_int("child.exited", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fact_int("child.signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    dp_close(parent);
    return 0;
}
