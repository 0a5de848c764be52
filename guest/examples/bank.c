/* bank: two tellers deposit into one account, without a lock.
 *
 * Each teller reads the balance, writes a line to the ledger (a system call),
 * then stores the balance it read plus its deposit. If the other teller runs
 * between that read and that store, one deposit is lost. The fix is
 * bank-fixed.c. Exit status 2 means money was lost.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

long balance = 1000;

struct teller {
    const char *name;
    long deposit;
};

static void *teller(void *arg)
{
    struct teller *t = arg;
    long seen = balance; /* read */
    char line[80];
    int n = snprintf(line, sizeof line, "%s: balance %ld, depositing %ld\n",
                     t->name, seen, t->deposit);
    write(1, line, n);            /* the ledger */
    balance = seen + t->deposit;  /* store: the bug, another teller may have stored since the read */
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
