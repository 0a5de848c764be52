/* pool: a worker checks the stop flag without the lock, then counts through the queue the shutdown freed.
 *
 * Main fills a queue of jobs, starts two workers that count through it pass
 * after pass (yielding the CPU between passes), lets them start, then shuts
 * the pool down: it sets the stop flag under the lock, frees the queue (and
 * clears the pointer) and joins the workers. A worker reads the flag without
 * taking the lock, announces its pass (a system call), and only then takes
 * the lock to count. If main shuts down between that read and that lock, the
 * worker counts through a queue that is gone and dies of SIGSEGV. The fix is
 * pool-fixed.c.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* How main lets the workers start. The tests also build it with a sleep
 * here (`pool-sleep`), where a schedule finds the crash away from the step
 * that decides it. */
#ifndef LET_WORKERS_START
#define LET_WORKERS_START() sched_yield()
#endif

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
    for (long pass = 1; !pool.stop; pass++) { /* the bug: the flag is read without the lock */
        say("worker %ld: pass %ld\n", me, pass);
        pthread_mutex_lock(&pool.lock);
        long cost = 0;
        for (size_t i = 0; i < pool.len; i++)
            cost += pool.queue[i].cost; /* the queue may be gone by now */
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
    LET_WORKERS_START(); /* let the workers start on the queue */
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
