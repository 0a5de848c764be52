/* handoff-fixed: handoff with the page count taken under the queue's lock.
 *
 * The same program as handoff.c, but each consumer counts the pages of its
 * buffer while it holds the mutex that guards the queue, so the two
 * consumers' updates are ordered: no count is lost in any schedule.
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
        for (int j = 0; j < SIZE; j += 4096)
            sum += buf[j];
        sums[i] = sum;
        pthread_mutex_lock(&lock);
        pages += SIZE / 4096; /* under the lock: ordered */
        pthread_mutex_unlock(&lock);
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
