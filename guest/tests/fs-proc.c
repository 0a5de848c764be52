/* fs-proc: the monitor's /proc and /dev files: /proc/self/stat and status,
 * /proc/<pid>, /proc/cpuinfo and /sys/devices/system/cpu/online agreeing
 * with the run's --cores, /dev/tty (no terminal: ENXIO), /dev/null and
 * /dev/zero. One line per fact; "FAIL" on any surprise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
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
