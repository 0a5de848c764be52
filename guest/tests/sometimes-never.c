/* sometimes-never: an SDK `sometimes` that no schedule can make true. Two
 * workers each add to the total under a lock, so main, which looks under
 * the same lock, never sees an update half done: `rewind check` tries its
 * schedules, none reaches it, and the check fails on the unmet `sometimes`
 * (which `rewind lsp` shows on the call's line). Exits 0. */
#include <pthread.h>
#include <stdio.h>
#include "../sdk/rewind.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total, pending;

static void *worker(void *arg)
{
    pthread_mutex_lock(&lock);
    pending = (long)arg; /* half done... */
    total += pending;
    pending = 0; /* ...done */
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, worker, (void *)1);
    pthread_create(&b, NULL, worker, (void *)2);
    pthread_mutex_lock(&lock);
    long seen = pending;
    pthread_mutex_unlock(&lock);
    sometimes(seen != 0, "main sees an update half done");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("total %ld\n", total);
    return 0;
}
