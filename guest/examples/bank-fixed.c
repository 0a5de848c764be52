/* bank-fixed: bank.c with a mutex around each teller's read-modify-write.
 *
 * Holding the lock from the read of the balance to the store makes the
 * deposit atomic: however the tellers interleave, no money is lost.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

long balance = 1000;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct teller {
    const char *name;
    long deposit;
};

static void *teller(void *arg)
{
    struct teller *t = arg;
    pthread_mutex_lock(&lock);
    long seen = balance; /* read */
    char line[80];
    int n = snprintf(line, sizeof line, "%s: balance %ld, depositing %ld\n",
                     t->name, seen, t->deposit);
    write(1, line, n);            /* the ledger */
    balance = seen + t->deposit;  /* store, still under the lock */
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void)
{
    struct teller alice = {"alice", 100}, bob = {"bob", 50};
    long expected = balance + alice.deposit + bob.deposit;
    pthread_t a, b;
    pthread_create(&a, NULL, teller, &alice);
    pthread_create(&b, NULL, teller, &bob);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("final balance %ld, expected %ld\n", balance, expected);
    if (balance != expected) {
        printf("money lost: %ld\n", expected - balance);
        return 2;
    }
    return 0;
}
