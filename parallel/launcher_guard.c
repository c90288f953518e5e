/* The launcher guard (launcher_guard.h): a detached process that ends this rank's launcher
 * daemon when it has not ended by itself after the rank left. */
#include "parallel/launcher_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The 22nd field of /proc/PID/stat: the start time, which tells a process from a later one that
 * reuses its pid. Empty when the process is gone. */
static void start_time_of(pid_t pid, char *out, size_t len) {
    char path[64], buf[1024];
    out[0] = '\0';
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
    if (!p) return;
    size_t k = 0;
    for (p++; *p && *p != ' ' && k + 1 < len; p++) out[k++] = *p;
    out[k] = '\0';
}

static int is_open_mpi_launcher(pid_t pid) {
    static const char *const names[] = {"mpirun", "mpiexec", "orterun", "orted", "prterun",
                                        "prted"};
    char path[64], comm[64] = {0};
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, comm, sizeof comm - 1);
    close(fd);
    if (n <= 0) return 0;
    comm[strcspn(comm, "\n")] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(comm, names[i])) return 1;
    return 0;
}

void launcher_guard_start(unsigned delay_s) {
    const pid_t launcher = getppid();
    if (launcher <= 1 || !is_open_mpi_launcher(launcher)) return;
    char started[32], line[256];
    start_time_of(launcher, started, sizeof started);
    int len = snprintf(line, sizeof line,
                       "tripar: stall: the launcher (pid %d) had not ended %u s after its ranks "
                       "left (waiting on a lost node?); killed it\n",
                       (int)launcher, delay_s);
    if (len < 0 || (size_t)len >= sizeof line) len = (int)strlen(line);
    char stderr_path[64];
    snprintf(stderr_path, sizeof stderr_path, "/proc/%d/fd/2", (int)launcher);
    const pid_t child = fork();
    if (child != 0) return; /* the rank goes on to exit; a failed fork just means no guard */
    /* The guard: a session of its own (the launcher's kill of its process group misses it), no
     * descriptor of the rank's (the launcher waits for its ranks' output pipes to close). */
    setsid();
    for (int fd = 0; fd < 1024; fd++) close(fd);
    const struct timespec wait = {(time_t)delay_s, 0};
    nanosleep(&wait, NULL);
    char now[32];
    start_time_of(launcher, now, sizeof now);
    if (now[0] && !strcmp(now, started)) {
        int err = open(stderr_path, O_WRONLY | O_APPEND);
        if (err >= 0) {
            ssize_t w = write(err, line, (size_t)len);
            (void)w;
            close(err);
        }
        kill(launcher, SIGKILL);
    }
    _exit(0);
}
