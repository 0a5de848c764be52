/* spawn-ids: posix_spawn with POSIX_SPAWN_RESETIDS, as GNU make starts a
 * recipe's command: the child sets its ids (setresuid, setresgid) before
 * it execs, and a failure there ends it with 127, make's `Error 127`.
 * Spawns itself with `child`, which exits 7; prints `all passed`. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return 7;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_RESETIDS);
    char *args[] = {argv[0], "child", NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", NULL, &attr, args, environ);
    int status = 0;
    if (err == 0)
        waitpid(pid, &status, 0);
    if (err != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 7) {
        printf("FAIL posix_spawn: error %d, status 0x%x\n", err, status);
        return 1;
    }
    printf("ok: the child ran and exited 7\nall passed\n");
    return 0;
}
