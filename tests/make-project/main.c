#include <stdio.h>
#include <stdlib.h>
#include "tally.h"

int main(int argc, char **argv)
{
    long v[64];
    size_t n = 0;
    for (int i = 1; i < argc && n < 64; i++)
        v[n++] = strtol(argv[i], NULL, 10);
    printf("n=%zu sum=%ld max=%ld mean=%.2f\n", n, sum(v, n), max_of(v, n),
           mean(v, n));
    return 0;
}
