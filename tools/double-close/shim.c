// An LD_PRELOAD wrapper of close(2) for tools/double-close/run.sh: every close that fails with EBADF
// (a descriptor closed twice, or never opened) is written, with the closing thread's stack, to
// $DOUBLE_CLOSE_DIR/log.<pid>. A double close whose number was reused in between closes someone else's
// file instead and fails nothing, so it shows only as the EBADF of the runs where it was not reused:
// run the suite a few times.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int (*real_close)(int);
static int logfd = -1;

__attribute__((constructor)) static void start(void) {
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    const char *dir = getenv("DOUBLE_CLOSE_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/log.%d", dir, getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    // Out of the way of the low numbers the process under test uses.
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
    if (high >= 0) { real_close(fd); fd = high; }
    logfd = fd;
}

int close(int fd) {
    if (!real_close) real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd == logfd) { errno = EBADF; return -1; }
    int result = real_close(fd);
    if (result == -1 && errno == EBADF && logfd >= 0) {
        int saved = errno;
        char line[160];
        int n = snprintf(line, sizeof line, "=== EBADF close(%d) pid %d tid %ld\n", fd, getpid(),
                         (long)syscall(SYS_gettid));
        if (write(logfd, line, (size_t)n) < 0) {}
        void *frames[48];
        backtrace_symbols_fd(frames, backtrace(frames, 48), logfd);
        errno = saved;
    }
    return result;
}
