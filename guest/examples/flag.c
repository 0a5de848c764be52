/* flag: two box offices check a plain `sold` flag, then set it: the last seat is sold twice.
 *
 * Each office checks whether the last seat is sold and, if not, marks it
 * sold and takes the buyer's money. The check and the act are separate
 * accesses to a plain flag: if the other office checks between them, both
 * sell the seat. There is no system call in the window. The fix is
 * flag-fixed.c. Exit status 2 means the seat was sold twice.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

volatile int sold;     /* the last seat */
volatile int sales[2]; /* what each office sold */

static void *office(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&gate);
    if (!sold) {       /* check */
        sold = 1;      /* act: the other office may have checked since */
        sales[id] = 1;
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, office, (void *)0);
    pthread_create(&b, NULL, office, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int n = sales[0] + sales[1];
    printf("the last seat was sold %d time%s\n", n, n == 1 ? "" : "s");
    return n == 1 ? 0 : 2;
}
