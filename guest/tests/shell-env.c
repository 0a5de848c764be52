// For `rewind shell --pid`: a child that changes directory and execs
// itself with an environment of its own, then sleeps, while its parent
// waits for it. A shell in the child's process sees that environment and
// directory, not the run's.
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "child") == 0) {
        struct timespec t = {1, 0};
        nanosleep(&t, NULL);
        return 0;
    }
    mkdir("/tmp/work", 0755);
    pid_t child = fork();
    if (child == 0) {
        chdir("/tmp/work");
        char *env[] = {"ROLE=child-of-exec", "PATH=/opt/child/bin", NULL};
        execve("/proc/self/exe", (char *[]){"shell-env", "child", NULL}, env);
        _exit(127);
    }
    printf("child %d\n", child);
    fflush(stdout);
    int st;
    waitpid(child, &st, 0);
    return WEXITSTATUS(st);
}
