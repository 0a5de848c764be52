/* refcount: two threads drop their references to one object with a load and a store: it can be freed twice.
 *
 * main makes a session object with two references and hands it to two
 * workers. Each uses it, then drops its reference: `s->refs--` (a load, a
 * subtraction and a store) and, if the count it then reads is 0, frees the
 * session. When one worker's load and store straddle the other's, both
 * stores write the same count, or both workers read 0 afterwards: the
 * session is never freed, or it is freed twice (the C library aborts with
 * "double free detected"), or one worker reads it after the other freed
 * it. The fix is refcount-fixed.c. Exit status 2 means the session leaked.
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
    s->refs--; /* load, subtract, store: the race */
    if (s->refs == 0) {
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
