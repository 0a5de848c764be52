/* account: variables a debugger names in breakpoint conditions, data
 * breakpoints, logpoints and the Globals scope: a global balance that a
 * thread overdraws, a static count, a thread-local, and errno after a
 * failed open. Asks for -O0 so that every line keeps its own code. */
#pragma GCC optimize("O0")
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

long balance = 100;
static int withdrawals;
__thread long spent;

static long charge(long amount)
{
    return amount;
}

static void withdraw(long amount)
{
    balance -= charge(amount);
    spent += amount;
    withdrawals++;
}

static void *spender(void *arg)
{
    long amount = (long)arg;
    for (int i = 0; i < 3; i++)
        withdraw(amount);
    return NULL;
}

int main(void)
{
    pthread_t t;
    withdraw(10);
    pthread_create(&t, NULL, spender, (void *)40);
    pthread_join(t, NULL);
    if (open("/no/such/file", O_RDONLY) < 0)
        write(1, "mark\n", 5);
    return 0;
}
