/* counter-fixed: counter.c with a mutex around each increment.
 *
 * Holding the lock from the load of `total` to the store makes each
 * increment whole: however the workers interleave, none is lost.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define ROUNDS 20

volatile long total;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&lock);
        total++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("total %ld, expected %d\n", total, 2 * ROUNDS);
    if (total != 2 * ROUNDS) {
        printf("lost %ld increments\n", 2 * ROUNDS - total);
        return 2;
    }
    return 0;
}
