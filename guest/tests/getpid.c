/* getpid: makes N getpid system calls (argv[1], default 10000): the
 * benchmark's measure of the engine's step rate. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    for (long i = 0; i < n; i++)
        syscall(SYS_getpid);
    return 0;
}
