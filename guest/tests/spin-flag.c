/* spin-flag: two threads hand a turn back and forth through plain
 * variables, each spinning until the other has written: no system call,
 * no futex, no atomic. Under schedule 0 with `--points memory` every read
 * of a flag is a point, and a thread that only reads for long enough
 * yields, so its writer runs and both finish; with system-call points
 * only, the first spinner keeps the CPU for ever. */
#include <pthread.h>
#include <stdio.h>

static volatile int started, go;

static void *spinner(void *arg)
{
    started = 1;
    while (!go)
        ;
    return 0;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, spinner, 0);
    while (!started)
        ;
    go = 1;
    pthread_join(t, 0);
    printf("both finished\n");
    return 0;
}
