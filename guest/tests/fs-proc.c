/* fs-proc: the monitor's /proc and /dev files: /proc/self/stat and status,
 * /proc/<pid>, /proc/cpuinfo and /sys/devices/system/cpu/online agreeing
 * with the run's --cores, /dev/tty (no terminal: ENXIO), /dev/null and
 * /dev/zero; a parent reading its child's /proc/<pid>/ (stat, status,
 * cmdline, comm, task/, fd/) while the child waits, a zombie's (state Z)
 * until it is reaped, and the directory gone once it is; a thread's /proc/self/task/<tid>/comm. One
 * line per fact; "FAIL" on any surprise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
}

static int slurp(const char *path, char *buf, int room)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int n = 0, r;
    while (n < room - 1 && (r = read(fd, buf + n, room - 1 - n)) > 0)
        n += r;
    buf[n] = 0;
    close(fd);
    return n;
}

/* Whether directory `path` has an entry `name`, and how many it has
 * besides . and .. (in *count). */
static int has_entry(const char *path, const char *name, int *count)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0, n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        n++;
        found |= !strcmp(e->d_name, name);
    }
    closedir(d);
    if (count)
        *count = n;
    return found;
}

static int waker[2];

static void *sleeper(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "fs-proc-worker");
    char c;
    read(waker[0], &c, 1);
    return NULL;
}

/* A child that names itself, says it is ready, and waits on a pipe: its
 * parent reads its /proc/<pid>/ meanwhile. */
static void child_entries(void)
{
    static char buf[65536];
    char path[64], want[64];
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) {
        check(0, "pipes for the child");
        return;
    }
    pid_t kid = fork();
    if (kid == 0) {
        prctl(PR_SET_NAME, "fs-proc-kid");
        close(ready[0]);
        close(go[1]);
        write(ready[1], "r", 1);
        char c;
        read(go[0], &c, 1);
        _exit(7);
    }
    close(ready[1]);
    close(go[0]);
    char c;
    check(read(ready[0], &c, 1) == 1, "the child is ready");
    snprintf(path, sizeof path, "%d", kid);
    check(has_entry("/proc", path, NULL), "/proc lists the child");
    snprintf(path, sizeof path, "/proc/%d/stat", kid);
    slurp(path, buf, sizeof buf);
    snprintf(want, sizeof want, "%d (fs-proc-kid) ", kid);
    char state = strncmp(buf, want, strlen(want)) == 0 ? buf[strlen(want)] : '?';
    snprintf(want, sizeof want, " %d %d ", getpid(), getpgrp());
    check((state == 'S' || state == 'R') && strstr(buf, want),
          "/proc/<child>/stat: pid (comm) state ppid pgrp");
    snprintf(path, sizeof path, "/proc/%d/status", kid);
    slurp(path, buf, sizeof buf);
    snprintf(want, sizeof want, "\nPPid:\t%d\n", getpid());
    check(strstr(buf, "Name:\tfs-proc-kid\n") && strstr(buf, want) &&
              strstr(buf, "\nThreads:\t1\n"),
          "/proc/<child>/status: name, ppid, threads");
    snprintf(path, sizeof path, "/proc/%d/comm", kid);
    slurp(path, buf, sizeof buf);
    check(!strcmp(buf, "fs-proc-kid\n"), "/proc/<child>/comm");
    snprintf(path, sizeof path, "/proc/%d/cmdline", kid);
    int n = slurp(path, buf, sizeof buf);
    check(n > 0 && strstr(buf, "fs-proc"), "/proc/<child>/cmdline");
    snprintf(path, sizeof path, "/proc/%d/task", kid);
    snprintf(want, sizeof want, "%d", kid);
    int tasks = 0;
    check(has_entry(path, want, &tasks) && tasks == 1, "/proc/<child>/task: its one thread");
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", kid, kid);
    slurp(path, buf, sizeof buf);
    check(!strcmp(buf, "fs-proc-kid\n"), "/proc/<child>/task/<tid>/comm");
    snprintf(path, sizeof path, "/proc/%d/fd", kid);
    check(has_entry(path, "0", NULL) && !has_entry(path, "99", NULL), "/proc/<child>/fd");
    write(go[1], "g", 1);
    /* Ended and not reaped: a zombie, still in /proc. */
    siginfo_t info;
    check(waitid(P_PID, kid, &info, WEXITED | WNOWAIT) == 0 && info.si_pid == kid,
          "the child ended (not reaped yet)");
    snprintf(path, sizeof path, "/proc/%d/stat", kid);
    slurp(path, buf, sizeof buf);
    snprintf(want, sizeof want, "%d (fs-proc-kid) Z %d ", kid, getpid());
    check(strncmp(buf, want, strlen(want)) == 0, "/proc/<zombie>/stat: state Z");
    snprintf(path, sizeof path, "/proc/%d/status", kid);
    slurp(path, buf, sizeof buf);
    check(strstr(buf, "\nState:\tZ (zombie)\n") != NULL, "/proc/<zombie>/status");
    int st = 0;
    check(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 7,
          "the child exited 7");
    snprintf(path, sizeof path, "/proc/%d/stat", kid);
    check(open(path, O_RDONLY) == -1 && errno == ENOENT, "/proc/<child> gone once reaped");
    close(ready[0]);
    close(go[1]);
}

/* Another thread of this process, named, in /proc/self/task/. */
static void thread_entries(void)
{
    static char buf[256];
    char path[300];
    pthread_t t;
    if (pipe(waker) || pthread_create(&t, NULL, sleeper, NULL)) {
        check(0, "a thread");
        return;
    }
    int tasks = 0;
    /* The thread names itself first thing; wait until it has. */
    for (int i = 0; i < 1000; i++) {
        has_entry("/proc/self/task", "x", &tasks);
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int named = 0;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
                continue;
            snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
            slurp(path, buf, sizeof buf);
            named = !strcmp(buf, "fs-proc-worker\n");
        }
        if (d)
            closedir(d);
        if (named)
            break;
        usleep(1000);
    }
    check(tasks == 2 && !strcmp(buf, "fs-proc-worker\n"), "/proc/self/task/<tid>/comm");
    write(waker[1], "w", 1);
    pthread_join(t, NULL);
}

int main(void)
{
    static char buf[65536];
    char want[64];
    int pid = getpid();

    check(open("/dev/tty", O_RDWR) == -1 && errno == ENXIO, "/dev/tty: ENXIO");
    int fd = open("/dev/null", O_RDWR);
    check(write(fd, "x", 1) == 1 && read(fd, buf, 8) == 0, "/dev/null");
    close(fd);
    fd = open("/dev/zero", O_RDONLY);
    check(read(fd, buf, 8) == 8 && buf[0] == 0 && buf[7] == 0, "/dev/zero");
    close(fd);

    slurp("/proc/self/stat", buf, sizeof buf);
    snprintf(want, sizeof want, "%d (fs-proc) R %d ", pid, getppid());
    check(strncmp(buf, want, strlen(want)) == 0, "/proc/self/stat: pid (comm) state ppid");
    slurp("/proc/self/status", buf, sizeof buf);
    snprintf(want, sizeof want, "\nPid:\t%d\n", pid);
    check(strstr(buf, "Name:\tfs-proc\n") && strstr(buf, want) && strstr(buf, "\nThreads:\t1\n"),
          "/proc/self/status: name, pid, threads");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    int n = slurp(path, buf, sizeof buf);
    check(n > 0 && strstr(buf, "fs-proc"), "/proc/<pid>/cmdline");
    check(readlink("/proc/self", want, sizeof want) > 0 && atoi(want) == pid, "/proc/self");
    child_entries();
    thread_entries();

    n = slurp("/proc/cpuinfo", buf, sizeof buf);
    int processors = 0;
    for (char *p = buf; (p = strstr(p, "processor\t:")); p++)
        processors++;
    printf("cpuinfo processors: %d, get_nprocs: %d, online: ", processors, get_nprocs());
    slurp("/sys/devices/system/cpu/online", buf, sizeof buf);
    printf("%s", buf);
    check(processors == get_nprocs() && processors == sysconf(_SC_NPROCESSORS_ONLN),
          "/proc/cpuinfo agrees with the online CPUs");
    return 0;
}
