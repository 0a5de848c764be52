/* sdk-fixed: sdk.c with the check and the take of a seat under one lock.
 *
 * An office holds the lock from the check that a seat is left to the take,
 * so no two offices can sell the same last seat, and the SDK's
 * always("no seat is sold twice") holds in every schedule.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../sdk/rewind.h"

static int seats_left = 3;
static int sold[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *office(void *arg)
{
    long me = (long)arg;
    for (int k = 0; k < 2; k++) {
        pthread_mutex_lock(&lock);
        if (seats_left > 0) { /* check */
            char line[64];
            int n = snprintf(line, sizeof line, "office %ld: ticket for seat %d\n", me, seats_left);
            write(1, line, n); /* print the ticket */
            seats_left--;      /* take, still under the lock */
            sold[me]++;
        }
        pthread_mutex_unlock(&lock);
        always(seats_left >= 0, "no seat is sold twice");
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    bookmark("box offices open");
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, office, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    sometimes(sold[0] > 0 && sold[1] > 0, "both offices sell a seat");
    printf("sold %d + %d, %d seats left\n", sold[0], sold[1], seats_left);
    return 0;
}
