/* threads: four workers sum slices of 1..N under a mutex; a condition
 * variable tells main when all have reported. Each worker also checks its
 * thread-local variable and allocates from the heap. Prints one line per
 * worker and the total, then exits 3 so that the status comes through.
 * Built twice by tests/build.rs: with glibc and with musl. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 4
#define N 100000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reported = PTHREAD_COND_INITIALIZER;
static int done;
static long long total;
static __thread long mine = -1;

static void *worker(void *arg)
{
    long id = (long)arg;
    mine = id;
    long long sum = 0;
    char *scratch = malloc(1 << 16);
    memset(scratch, (int)id, 1 << 16);
    for (long i = id * (N / WORKERS) + 1; i <= (id + 1) * (N / WORKERS); i++)
        sum += i + scratch[i % (1 << 16)] - id;
    free(scratch);
    pthread_mutex_lock(&lock);
    total += sum;
    done++;
    printf("worker %ld: sum %lld, tls %s\n", id, sum, mine == id ? "ok" : "WRONG");
    fflush(stdout);
    pthread_cond_signal(&reported);
    pthread_mutex_unlock(&lock);
    return (void *)sum;
}

int main(void)
{
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 1;
    pthread_mutex_lock(&lock);
    while (done < WORKERS)
        pthread_cond_wait(&reported, &lock);
    pthread_mutex_unlock(&lock);
    long long joined = 0;
    for (int i = 0; i < WORKERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        joined += (long long)(long)r;
    }
    printf("total %lld, joined %lld\n", total, joined);
    return 3;
}
