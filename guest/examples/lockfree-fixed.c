/* lockfree-fixed: lockfree.c pushing with compare-and-swap, retrying when the top moved.
 *
 * The new top is stored only if the top is still the one the node was
 * linked to; otherwise the push relinks and tries again. No push is lost.
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
struct node *top;

static void push(struct node *n)
{
    struct node *seen = __atomic_load_n(&top, __ATOMIC_SEQ_CST);
    do
        n->next = seen;
    while (!__atomic_compare_exchange_n(&top, &seen, n, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
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
