/* long: two threads make N system calls between them (argv[1], default
 * 100000) over a touched megabyte, for keyframes and late forks. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile long shared;

static void *work(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        shared++;
        if (i % 1000 == 0)
            sched_yield();
        getpid();
    }
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    char *p = malloc(1 << 20);
    for (int i = 0; i < (1 << 20); i += 4096)
        p[i] = (char)i;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], 0, work, (void *)(n / 2));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    printf("shared %ld\n", shared);
    return 0;
}
