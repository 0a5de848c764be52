/* lazy-fixed: lazy.c initialising the config once with pthread_once.
 *
 * pthread_once runs the initialiser exactly once, and every caller returns
 * only after it finished: no worker sees the config half-done.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

struct config {
    volatile int port;
    volatile int workers;
};

static struct config storage;
static pthread_once_t once = PTHREAD_ONCE_INIT;
volatile int seen_port[2];

static void init_config(void)
{
    storage.port = 8080;
    storage.workers = 4;
}

static struct config *get_config(void)
{
    pthread_once(&once, init_config);
    return &storage;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&gate);
    seen_port[id] = get_config()->port;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, worker, (void *)0);
    pthread_create(&b, NULL, worker, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("worker 0 saw port %d, worker 1 saw port %d\n", seen_port[0], seen_port[1]);
    return seen_port[0] == 8080 && seen_port[1] == 8080 ? 0 : 2;
}
