/* counter: two threads add to a shared total with `total++`, no lock: lost updates.
 *
 * Each worker adds 1 to `total` ROUNDS times. `total++` is a load, an add
 * and a store (volatile, so the compiler keeps every load and store, as a
 * debug build does); if the other worker stores between this worker's load
 * and its store, that increment is lost. There is no system call in the
 * window: only scheduling points at memory accesses can put one there. The
 * fix is counter-fixed.c. Exit status 2 means an increment was lost.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define ROUNDS 20

volatile long total;

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++)
        total++; /* load, add, store: the race */
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
