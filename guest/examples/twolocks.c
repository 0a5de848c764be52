/* twolocks: one balance guarded by two different mutexes: each teller's lock excludes nobody.
 *
 * The deposit path takes `deposit_lock`, the fee path takes `fee_lock`;
 * both update `balance` under their own lock, so a deposit and a fee can
 * run at once, and one update is lost when a path stores between the other
 * path's load and store. Locking an uncontended mutex is an atomic
 * instruction, not a system call: there is none in the window. The fix,
 * twolocks-fixed.c, guards the balance with one lock. Exit status 2 means
 * an update was lost.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define ROUNDS 5

volatile long balance = 1000;
pthread_mutex_t deposit_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t fee_lock = PTHREAD_MUTEX_INITIALIZER;

static void *deposits(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&deposit_lock);
        balance = balance + 10; /* load, add, store under deposit_lock */
        pthread_mutex_unlock(&deposit_lock);
    }
    return NULL;
}

static void *fees(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&fee_lock);
        balance = balance - 1; /* load, subtract, store under fee_lock */
        pthread_mutex_unlock(&fee_lock);
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
