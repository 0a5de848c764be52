/* deadlock: two threads take two mutexes in opposite orders. A barrier
 * makes sure each holds its first mutex before either asks for its second,
 * so every run deadlocks: both wait forever, and main waits in join. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t accounts = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t audit = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;

static void *transfer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&accounts);
    pthread_barrier_wait(&both_hold_one);
    pthread_mutex_lock(&audit); /* waits forever: auditor holds it */
    pthread_mutex_unlock(&audit);
    pthread_mutex_unlock(&accounts);
    return NULL;
}

static void *auditor(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&audit);
    pthread_barrier_wait(&both_hold_one);
    pthread_mutex_lock(&accounts); /* waits forever: transfer holds it */
    pthread_mutex_unlock(&accounts);
    pthread_mutex_unlock(&audit);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&both_hold_one, NULL, 2);
    printf("starting transfer and auditor\n");
    fflush(stdout);
    pthread_create(&a, NULL, transfer, NULL);
    pthread_create(&b, NULL, auditor, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
