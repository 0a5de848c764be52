/* pages: maps N pages (argv[1], default 1000) and touches each once: the
 * benchmark's measure of demand page faults served by the monitor. */
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    volatile char *p = mmap(NULL, n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    for (long i = 0; i < n; i++)
        p[i * 4096] = 1;
    return 0;
}
