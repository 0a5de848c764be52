/* handoff: a producer hands big buffers to two consumers through a mutex and a condition variable; their page count is not locked.
 *
 * main fills BUFFERS buffers of SIZE bytes each (256 KB: the C library
 * maps each afresh) and queues them; two consumers take one at a time (the
 * queue is guarded by a mutex, and they wait on a condition variable) and
 * add up the first byte of every page, counting the pages they read in
 * `pages++` after unlocking: a load and a store with nothing ordering the
 * two consumers' updates. The buffers themselves are handed over properly
 * (sharing, not a race); the count is the race. The fix is
 * handoff-fixed.c. Exit status 2 means a count was lost.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFERS 4
#define SIZE (256 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static unsigned char *queue[BUFFERS];
static int queued, taken;
static long sums[BUFFERS];

volatile int pages;

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (taken == queued && queued < BUFFERS)
            pthread_cond_wait(&ready, &lock);
        if (taken == BUFFERS) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int i = taken++;
        unsigned char *buf = queue[i];
        pthread_mutex_unlock(&lock);
        long sum = 0;
        for (int j = 0; j < SIZE; j += 4096) {
            sum += buf[j];
            pages++; /* load, add, store, outside the lock: the race */
        }
        sums[i] = sum;
    }
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, consumer, NULL);
    pthread_create(&b, NULL, consumer, NULL);
    for (int i = 0; i < BUFFERS; i++) {
        unsigned char *buf = malloc(SIZE);
        memset(buf, i + 1, SIZE);
        pthread_mutex_lock(&lock);
        queue[queued++] = buf;
        pthread_cond_broadcast(&ready);
        pthread_mutex_unlock(&lock);
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    long total = 0;
    for (int i = 0; i < BUFFERS; i++) {
        total += sums[i];
        free(queue[i]);
    }
    printf("%d pages read, sum %ld\n", pages, total);
    if (pages != BUFFERS * SIZE / 4096) {
        printf("lost %d counts\n", BUFFERS * SIZE / 4096 - pages);
        return 2;
    }
    return 0;
}
