/* Values for the debugger to show: a worker thread calls inspect() with a
 * linked list, and inspect() holds ints, a struct, arrays, pointers, a
 * union, an enum, bit fields and C strings when it marks the moment.
 *
 * MARK() is a write(2) of "mark\n" (a step the tests find); a native test
 * compiles it as an int3 instead. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#ifndef MARK
#define MARK() write(1, "mark\n", 5)
#endif

enum color { RED, GREEN = 5, BLUE };

struct point {
    int x;
    int y;
};

union bits {
    unsigned int word;
    unsigned char bytes[4];
};

struct node {
    int value;
    const char *name;
    struct node *next;
    struct point at;
    int grid[2][3];
    enum color color;
    union bits bits;
    unsigned flag : 1;
    unsigned level : 3;
};

typedef struct node node_t;

static struct node third = {3, "third", 0, {30, 31}, {{0}}, BLUE, {0}, 0, 0};
static struct node second = {2, "second", &third, {20, 21}, {{0}}, RED, {0}, 1, 2};

int counter = 7;

/* The mark, inlined into inspect() even at -O0: the debugger's frames there
 * are this inlined one and inspect() at the same pc. */
static inline __attribute__((always_inline)) void mark_with(long v)
{
    volatile long seen = v + 1;
    MARK();
    (void)seen;
}

/* Reads what inspect() holds after the mark, so that it is in memory then. */
__attribute__((noinline)) static int sum(const int *a, int n, const char *w, const union bits *b)
{
    int s = (int)strlen(w) + b->bytes[0];
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) static int inspect(node_t *head, int count, const char *label)
{
    volatile int total = 0;
    volatile double ratio = 2.5;
    struct point origin = {3, -4};
    int squares[8];
    char word[8] = "hello";
    enum color shade = GREEN;
    union bits b;
    b.word = 0x04030201;
    for (int i = 0; i < 8; i++)
        squares[i] = i * i;
    for (node_t *n = head; n; n = n->next)
        total += n->value;
    int *first = &squares[1];
    {
        volatile long inner = count * 100L;
        mark_with(inner);
        total += (int)inner;
    }
    return total + origin.x + sum(squares, 8, word, &b) + shade + *first + (int)ratio +
           (label[0] == 'l');
}

static void *worker(void *arg)
{
    struct node head = {1, "head", &second, {10, 11}, {{1, 2, 3}, {4, 5, 6}}, GREEN,
                        {0x11223344}, 1, 5};
    (void)arg;
    inspect(&head, 3, "list");
    return 0;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    pthread_join(t, 0);
    return counter == 7 ? 0 : 1;
}
