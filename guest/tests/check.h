// CHECK(cond, fmt, ...): prints "ok: ..." or "FAIL (cond): ... (errno N:
// text)", one line each, and counts the failures; a test prints "all
// passed" when there were none. Output is flushed line by line, so a forked
// child's lines and its parent's stay in order.
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                            \
    do {                                                            \
        if (cond) {                                                 \
            printf("ok: " __VA_ARGS__);                             \
        } else {                                                    \
            int errno_ = errno; /* before printf can change it */   \
            printf("FAIL (%s): ", #cond);                           \
            printf(__VA_ARGS__);                                    \
            printf(" (errno %d: %s)", errno_, strerror(errno_));    \
            failures++;                                             \
        }                                                           \
        printf("\n");                                               \
        fflush(stdout);                                             \
    } while (0)
