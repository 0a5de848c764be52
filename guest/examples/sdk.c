/* sdk: an always() assertion of the Rewind SDK that some schedules break: two box offices oversell a show.
 *
 * Three seats are left and each box office sells up to two. An office checks
 * that a seat is left, prints the ticket (a system call), then takes the
 * seat. If the other office sells the last seat between that check and that
 * take, the show is oversold. Nothing crashes and the exit status does not
 * change: only the SDK's always("no seat is sold twice") says so, and
 * `rewind check` treats a failed always as a violation (the `sdk` property,
 * added because the program uses the SDK). sometimes("both offices sell a
 * seat") must hold in at least one run; bookmark() names the opening. The
 * fix is sdk-fixed.c. Outside Rewind the SDK calls do nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../sdk/rewind.h"

static int seats_left = 3;
static int sold[2];

static void *office(void *arg)
{
    long me = (long)arg;
    for (int k = 0; k < 2; k++) {
        if (seats_left > 0) { /* check */
            char line[64];
            int n = snprintf(line, sizeof line, "office %ld: ticket for seat %d\n", me, seats_left);
            write(1, line, n); /* print the ticket */
            seats_left--;      /* take: the bug, the other office may have taken the last seat since the check */
            sold[me]++;
        }
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
