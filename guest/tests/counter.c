/* counter: two threads each add 1 to a shared total N times (default 2000)
 * with `total = total + 1`: a read, then a write, and no system call
 * between them. Without a lock an update is lost when a thread is switched
 * out between its read and its write; `counter --locked` takes a mutex
 * around each update and never loses one. Exits 0 when the total is 2N,
 * else 1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long total;
static long per_thread = 2000;
static int locked;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *add(void *arg)
{
    for (long i = 0; i < per_thread; i++) {
        if (locked)
            pthread_mutex_lock(&lock);
        total = total + 1;
        if (locked)
            pthread_mutex_unlock(&lock);
    }
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--locked"))
            locked = 1;
        else
            per_thread = atol(argv[i]);
    }
    pthread_t a, b;
    pthread_create(&a, 0, add, 0);
    pthread_create(&b, 0, add, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("total %ld, expected %ld\n", total, 2 * per_thread);
    return total == 2 * per_thread ? 0 : 1;
}
