#include <ctype.h>
#include "tally.h"

size_t count_words(const char *s)
{
    size_t n = 0;
    int in = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s))
            in = 0;
        else if (!in) {
            in = 1;
            n++;
        }
    }
    return n;
}

size_t longest_word(const char *s)
{
    size_t best = 0, cur = 0;
    for (; *s; s++) {
        cur = isspace((unsigned char)*s) ? 0 : cur + 1;
        if (cur > best)
            best = cur;
    }
    return best;
}
