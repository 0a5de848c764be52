/* philosophers-fixed: philosophers.c with the forks taken in one global order.
 *
 * Each philosopher picks up the lower-numbered of her two forks first. The
 * philosopher between fork 0 and fork 4 then reaches for fork 0 first, like
 * her neighbour, so no cycle of waits can form: however the philosophers
 * interleave, someone can always eat, and everyone finishes.
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
    long first = left < right ? left : right, second = left < right ? right : left;
    for (int meal = 0; meal < MEALS; meal++) {
        pthread_mutex_lock(&forks[first]);
        say("philosopher %ld picks up fork %ld\n", me, first);
        pthread_mutex_lock(&forks[second]); /* the lower fork first: no cycle */
        say("philosopher %ld eats with fork %ld too\n", me, second);
        pthread_mutex_unlock(&forks[second]);
        pthread_mutex_unlock(&forks[first]);
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
