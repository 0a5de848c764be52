/* lockfree: a lock-free stack whose push reads and writes `top` as two plain accesses: a push is lost.
 *
 * Two threads push NODES nodes each onto a Treiber stack. A push links the
 * node to the top it read, then stores the node as the new top; between
 * the read and the store, the other thread may push, and its node is lost
 * (the stack skips it). The fix, lockfree-fixed.c, stores with a
 * compare-and-swap that fails, and retries, when the top moved. There is
 * no system call in the window. Exit status 2 means a node was lost.
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define NODES 8

struct node {
    struct node *next;
    int value;
};

static struct node nodes[2][NODES];
struct node *volatile top;

static void push(struct node *n)
{
    n->next = top; /* read the top */
    top = n;       /* store: the other thread may have pushed since the read */
}

static void *pusher(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < NODES; i++) {
        nodes[id][i].value = (int)id * 100 + i;
        push(&nodes[id][i]);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, pusher, (void *)0);
    pthread_create(&b, NULL, pusher, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int n = 0;
    for (struct node *p = top; p; p = p->next)
        n++;
    printf("%d nodes on the stack, expected %d\n", n, 2 * NODES);
    return n == 2 * NODES ? 0 : 2;
}
