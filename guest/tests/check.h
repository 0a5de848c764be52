// CHECK(cond, fmt, ...): prints "ok: ..." or "FAIL (cond): ...", one line
// each, and counts the failures; a test prints "all passed" when there
// were none. Output is flushed line by line, so a forked child's lines and
// its parent's stay in order.
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                  \
    do {                                  \
        if (cond) {                       \
            printf("ok: " __VA_ARGS__);   \
        } else {                          \
            printf("FAIL (%s): ", #cond); \
            printf(__VA_ARGS__);          \
            failures++;                   \
        }                                 \
        printf("\n");                     \
        fflush(stdout);                   \
    } while (0)
