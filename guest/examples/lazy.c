/* lazy: lazy initialisation publishes the config before filling it: a thread sees it half-done.
 *
 * Both workers call get_config(). The first to find `config` NULL sets it
 * to the storage and then fills in the fields; a worker that finds it set
 * uses it at once. If the other worker looks between the publication and
 * the fields' stores, it sees port 0. There is no system call in the
 * window. The fix is lazy-fixed.c. Exit status 2 means a worker saw a
 * half-initialised config.
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
struct config *volatile config;
volatile int seen_port[2];

static struct config *get_config(void)
{
    if (config == NULL) {
        config = &storage;   /* published too early */
        storage.port = 8080; /* filled in after */
        storage.workers = 4;
    }
    return config;
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
