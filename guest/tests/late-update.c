/* late-update: each teller reads the balance under a lock, then writes it
 * back after the unlock, with no system call between its load and its
 * store: a lost update.
 *
 * A teller takes the balance's page inside the lock and keeps it through
 * its unlock, so the other teller, which acquires that unlock, is ordered
 * after the page's epoch (docs/design.md, "Race-directed points"). Before
 * a lock's handover put its page on probation only memory points stopped
 * between the late load and store; now the balance, on the lock's page,
 * is learned. Exit status 2 means an update was lost.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t gate;
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
volatile long balance = 1000;
volatile long audited;

static void *teller(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    pthread_mutex_lock(&audit_lock);
    audited += balance; /* read under the lock */
    pthread_mutex_unlock(&audit_lock);
    balance = balance + 10; /* load and store after the unlock */
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, teller, NULL);
    pthread_create(&b, NULL, teller, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("balance %ld\n", balance);
    return balance == 1020 ? 0 : 2;
}
