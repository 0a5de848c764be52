/* lockfree: a lock-free free list whose pop has an ABA race: a node is handed out twice.
 *
 * Two threads take buffers from a Treiber stack of NODES nodes with
 * compare-and-swap. A pop reads the top node and its `next`, then swaps
 * `top` from that node to `next`. If the thread is preempted before its
 * compare-and-swap and the other thread pops that node and the one under
 * it, then pushes the first back, `top` holds the same node again (A, then
 * B, then A: the ABA problem), the compare-and-swap succeeds, and `top`
 * becomes the stale `next`: a node the other thread holds is on the list
 * again, and the next pop hands it out a second time. There is no system
 * call in the window. The fix, lockfree-fixed.c, tags `top` with a count
 * of its changes. Exit status 2 means a node was handed out twice (or lost).
 */
#include <pthread.h>
#include <stdio.h>

/* Both threads start their work together (a start gate). */
static pthread_barrier_t gate;

#define NODES 8
#define ROUNDS 3 /* each thread keeps one node a round */
#define NONE 0xffffffffu

struct node {
    unsigned next;
};

static struct node pool[NODES];
/* The index of the top node (NONE when the list is empty). */
unsigned long top;
static unsigned kept[2][ROUNDS];

static unsigned pop(void)
{
    unsigned long seen = __atomic_load_n(&top, __ATOMIC_SEQ_CST);
    for (;;) {
        if (seen == NONE)
            return NONE;
        unsigned next = pool[seen].next; /* stale if `seen` left and came back */
        if (__atomic_compare_exchange_n(&top, &seen, next, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return (unsigned)seen;
    }
}

static void push(unsigned n)
{
    unsigned long seen = __atomic_load_n(&top, __ATOMIC_SEQ_CST);
    do
        pool[n].next = (unsigned)seen;
    while (!__atomic_compare_exchange_n(&top, &seen, n, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
}

static void *taker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&gate);
    for (int i = 0; i < ROUNDS; i++) {
        unsigned a = pop();
        unsigned b = pop();
        push(a);         /* give the first back */
        kept[id][i] = b; /* keep the second */
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    for (unsigned i = 0; i < NODES; i++)
        pool[i].next = i + 1 < NODES ? i + 1 : NONE;
    top = 0;
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&a, NULL, taker, (void *)0);
    pthread_create(&b, NULL, taker, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    /* Every node once: on the list or kept by one thread. */
    int seen[NODES] = {0};
    int bad = 0;
    unsigned n = (unsigned)top;
    for (int steps = 0; n != NONE && steps <= NODES; steps++, n = pool[n].next)
        seen[n]++;
    if (n != NONE)
        bad = 1; /* a cycle */
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < ROUNDS; i++)
            if (kept[t][i] == NONE)
                bad = 1;
            else
                seen[kept[t][i]]++;
    for (int i = 0; i < NODES; i++)
        if (seen[i] != 1) {
            printf("node %d: %d times on the list or kept\n", i, seen[i]);
            bad = 1;
        }
    printf("%s\n", bad ? "a node was handed out twice" : "every node once");
    return bad ? 2 : 0;
}
