/* stepper: a small threaded program for line stepping, breakpoints and
 * data breakpoints in the debug adapter. Asks for -O0 so that every line
 * keeps its own code. */
#pragma GCC optimize("O0")
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

struct item {
    long value;
    struct item *next;
};

static struct item items[4];
struct item *queue;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
long total;

static long square(long x)
{
    long r = x * x;
    return r;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        struct item *it = queue;
        if (it)
            queue = it->next;
        pthread_mutex_unlock(&lock);
        if (!it)
            break;
        long s = square(it->value + id);
        total += s;
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    for (long i = 0; i < 4; i++) {
        items[i].value = i + 1;
        items[i].next = queue;
        queue = &items[i];
    }
    pthread_create(&t, NULL, worker, (void *)0);
    pthread_join(t, NULL);
    queue = NULL;
    printf("total %ld\n", total);
    write(1, "done\n", 5);
    return 0;
}
