/* exe-view: what a program is told about its own executable, as Linux
 * tells it: the target of /proc/self/exe and of /proc/PID/exe (the file
 * itself, links resolved, absolute), AT_EXECFN (the path given to execve,
 * as given), argv[0] and its comm. With `exec PATH ARGS...` it first execs
 * PATH with ARGS (argv[0] first), so the same is seen through execve. */
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

static void link_of(const char *path)
{
    char buf[4096];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("%s: %s\n", path[6] == 's' ? "/proc/self/exe" : "/proc/PID/exe", n < 0 ? "(none)" : buf);
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "exec") == 0) {
        execv(argv[2], argv + 3);
        perror("execv");
        return 127;
    }
    char pid_exe[64], comm[64] = "";
    snprintf(pid_exe, sizeof pid_exe, "/proc/%d/exe", (int)getpid());
    link_of("/proc/self/exe");
    link_of(pid_exe);
    printf("AT_EXECFN: %s\n", (const char *)getauxval(AT_EXECFN));
    for (int i = 0; i < argc; i++)
        printf("argv[%d]: %s\n", i, argv[i]);
    FILE *f = fopen("/proc/self/comm", "r");
    if (f && fgets(comm, sizeof comm, f))
        printf("comm: %s", comm);
    return 0;
}
