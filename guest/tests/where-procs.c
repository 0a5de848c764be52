/* where-procs: stacks in two processes, for `rewind where` (tests/tests/
 * symbols.rs and dynamic.rs; tests/build.rs builds it dynamically linked
 * too, as where-procs-dynamic). The parent forks and waits in
 * parent_waits; the child execs this program again, whose child_writes
 * writes one line from its own frame. So at the child's write the
 * parent's stack is in an address space the current process does not
 * share, and the program making the step is one execve loaded. With an
 * argument N the exec'd child first makes N getppid calls, so that a
 * keyframe lies between the exec and the write. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void __attribute__((noinline)) child_writes(void)
{
    static const char line[] = "the exec'd child writes\n";
    write(1, line, strlen(line)); /* where-procs: the child's write */
}

static int __attribute__((noinline)) parent_waits(pid_t child)
{
    int status = 0;
    waitpid(child, &status, 0); /* where-procs: the parent waits */
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        for (long i = argc > 2 ? atol(argv[2]) : 0; i > 0; i--)
            getppid();
        child_writes();
        return 0;
    }
    pid_t c = fork();
    if (c == 0) {
        char *args[] = {argv[0], "child", argc > 1 ? argv[1] : NULL, NULL};
        execv(argv[0], args);
        _exit(127);
    }
    return parent_waits(c);
}
