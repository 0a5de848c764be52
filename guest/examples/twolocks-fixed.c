/* twolocks-fixed: twolocks.c with both paths taking the one lock that guards the balance.
 *
 * A deposit and a fee now exclude each other: no update is lost.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define ROUNDS 5

volatile long balance = 1000;
pthread_mutex_t balance_lock = PTHREAD_MUTEX_INITIALIZER;

static void *deposits(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&balance_lock);
        balance = balance + 10;
        pthread_mutex_unlock(&balance_lock);
    }
    return NULL;
}

static void *fees(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&balance_lock);
        balance = balance - 1;
        pthread_mutex_unlock(&balance_lock);
    }
    return NULL;
}

int main(void)
{
    long expected = balance + ROUNDS * 10 - ROUNDS;
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, deposits, NULL);
    pthread_create(&b, NULL, fees, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("balance %ld, expected %ld\n", balance, expected);
    return balance == expected ? 0 : 2;
}
