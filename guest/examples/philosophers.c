/* philosophers: five philosophers, five forks, each takes her left fork first: a deadlock.
 *
 * Five philosophers sit at a round table with a fork between each two. Each
 * eats three times: she picks up the fork on her left (fork i), says so (a
 * system call), picks up the fork on her right (fork i-1), eats, and puts
 * both down. If every philosopher holds her left fork at once, each waits
 * forever for the fork her neighbour holds: a deadlock. Unperturbed, each
 * philosopher eats without meeting another; one reschedule while the first
 * holds her left fork lets the others sit down, and the table deadlocks.
 * The fix is philosophers-fixed.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PHILOSOPHERS 5
#define MEALS 3

static pthread_mutex_t forks[PHILOSOPHERS];

static void say(const char *fmt, long a, long b)
{
    char line[80];
    int n = snprintf(line, sizeof line, fmt, a, b);
    write(1, line, n);
}

static void *philosopher(void *arg)
{
    long me = (long)arg;
    long left = me, right = (me + PHILOSOPHERS - 1) % PHILOSOPHERS;
    for (int meal = 0; meal < MEALS; meal++) {
        pthread_mutex_lock(&forks[left]);
        say("philosopher %ld picks up fork %ld\n", me, left);
        pthread_mutex_lock(&forks[right]); /* the bug: waits holding the left fork */
        say("philosopher %ld eats with fork %ld too\n", me, right);
        pthread_mutex_unlock(&forks[right]);
        pthread_mutex_unlock(&forks[left]);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[PHILOSOPHERS];
    for (long i = 0; i < PHILOSOPHERS; i++)
        pthread_mutex_init(&forks[i], NULL);
    for (long i = 0; i < PHILOSOPHERS; i++)
        pthread_create(&t[i], NULL, philosopher, (void *)i);
    for (int i = 0; i < PHILOSOPHERS; i++)
        pthread_join(t[i], NULL);
    printf("every philosopher ate %d times\n", MEALS);
    return 0;
}
