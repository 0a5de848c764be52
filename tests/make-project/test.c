#include <stdio.h>
#include "tally.h"

static int failed;

static void expect(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failed++;
}

int main(void)
{
    const long v[] = {4, -2, 9, 7};
    expect(sum(v, 4) == 18, "sum");
    expect(max_of(v, 4) == 9, "max_of");
    expect(mean(v, 4) == 4.5, "mean");
    expect(sum(v, 0) == 0, "empty sum");
    expect(count_words("  the quick\tbrown  fox\n") == 4, "count_words");
    expect(longest_word("a bb cccc dd") == 4, "longest_word");
    if (failed) {
        printf("%d of 6 checks failed\n", failed);
        return 1;
    }
    printf("all 6 checks passed\n");
    return 0;
}
