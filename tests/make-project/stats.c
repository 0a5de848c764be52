#include "tally.h"

long sum(const long *v, size_t n)
{
    long s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

long max_of(const long *v, size_t n)
{
    long m = n ? v[0] : 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

double mean(const long *v, size_t n)
{
    return n ? (double)sum(v, n) / (double)n : 0.0;
}
