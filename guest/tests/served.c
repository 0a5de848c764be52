/* served: a server whose queue is NULL counts a served request: the fault
 * is in the middle of its line, after the loads of `s` and `s->q` that
 * begin it (at -O0), as in a debugger's usual crash. */
#pragma GCC optimize("O0")
#include <stdio.h>

struct queue {
    long served;
};

struct server {
    const char *name;
    struct queue *q;
};

static void serve(struct server *s)
{
    printf("serving %s\n", s->name);
    s->q->served++;
}

int main(void)
{
    struct server s = {"carol", NULL};
    serve(&s);
    return 0;
}
