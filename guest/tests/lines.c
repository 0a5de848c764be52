/* lines: one statement a line, for gdb's reverse-step and reverse-next.
 * Built like every test program (-O1), but asks for -O0 so that each line
 * keeps its own code and gdb's line stepping is exact. */
#pragma GCC optimize("O0")
#include <unistd.h>

static long total;

static long add(long a, long b)
{
    return a + b;
}

int main(void)
{
    long cost = 0;
    for (long i = 0; i < 10; i++)
        cost = add(cost, i * 3);
    total = cost;
    write(1, "done\n", 5);
    total = cost * 2;
    return total == 270 ? 0 : 1;
}
