/* flag-fixed: flag.c with the check and the act made one atomic exchange.
 *
 * `__atomic_exchange_n` sets the flag and returns what it was in one
 * indivisible step: only the office that saw it clear sells the seat.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

int sold;
volatile int sales[2];

static void *office(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&gate);
    if (!__atomic_exchange_n(&sold, 1, __ATOMIC_SEQ_CST))
        sales[id] = 1;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, office, (void *)0);
    pthread_create(&b, NULL, office, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int n = sales[0] + sales[1];
    printf("the last seat was sold %d time%s\n", n, n == 1 ? "" : "s");
    return n == 1 ? 0 : 2;
}
