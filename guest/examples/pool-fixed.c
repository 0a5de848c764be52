/* pool-fixed: pool.c with the stop flag read under the lock that guards the queue.
 *
 * A worker takes the lock, then reads the flag, announces its pass and
 * counts, all before it lets the lock go. Main sets the flag under the same
 * lock before it frees the queue, so a worker either counts a queue that is
 * still there or sees the flag and stops: however the threads interleave,
 * nobody touches the freed queue.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKERS 2
#define JOBS 100

struct job {
    long id, cost;
};

static struct {
    pthread_mutex_t lock;
    int stop;
    struct job *queue;
    size_t len;
} pool = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0};

static long counted[WORKERS];

static void say(const char *fmt, long a, long b)
{
    char line[80];
    int n = snprintf(line, sizeof line, fmt, a, b);
    write(1, line, n);
}

static void *worker(void *arg)
{
    long me = (long)arg;
    for (long pass = 1;; pass++) {
        pthread_mutex_lock(&pool.lock);
        if (pool.stop) { /* read under the lock: main frees the queue only after setting it */
            pthread_mutex_unlock(&pool.lock);
            break;
        }
        say("worker %ld: pass %ld\n", me, pass);
        long cost = 0;
        for (size_t i = 0; i < pool.len; i++)
            cost += pool.queue[i].cost; /* still there: stop is not set */
        counted[me] = cost;
        pthread_mutex_unlock(&pool.lock);
        sched_yield(); /* let the others work before the next pass */
    }
    return NULL;
}

int main(void)
{
    pool.queue = calloc(JOBS, sizeof *pool.queue);
    for (long i = 0; i < JOBS; i++)
        pool.queue[pool.len++] = (struct job){i, i % 7};
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    sched_yield(); /* let the workers start on the queue */
    say("main: shutting down %ld workers, %ld jobs queued\n", WORKERS, JOBS);
    pthread_mutex_lock(&pool.lock);
    pool.stop = 1;
    pthread_mutex_unlock(&pool.lock);
    free(pool.queue); /* the workers must not touch it now */
    pool.queue = NULL;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("workers counted %ld and %ld\n", counted[0], counted[1]);
    return 0;
}
