/* refcount-fixed: refcount with the reference dropped by one atomic subtraction.
 *
 * The same program as refcount.c, but a worker drops its reference with
 * one atomic fetch-and-subtract and frees the session when the count it
 * took away was the last: exactly one worker sees that, in any schedule.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct session {
    volatile int refs;
    char user[32];
    long requests;
};

static pthread_barrier_t gate;
static volatile int freed;

static void release(struct session *s)
{
    if (__atomic_fetch_sub(&s->refs, 1, __ATOMIC_ACQ_REL) == 1) {
        memset(s->user, 0, sizeof s->user);
        free(s);
        freed++;
    }
}

static void *worker(void *arg)
{
    struct session *s = arg;
    pthread_barrier_wait(&gate);
    s->requests += strlen(s->user);
    release(s);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    struct session *s = malloc(sizeof *s);
    s->refs = 2;
    s->requests = 0;
    strcpy(s->user, "ada");
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, worker, s);
    pthread_create(&b, NULL, worker, s);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("session freed %d times\n", freed);
    if (freed != 1) {
        printf("the session leaked\n");
        return 2;
    }
    return 0;
}
