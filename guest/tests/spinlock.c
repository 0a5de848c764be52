/* spinlock: a holder takes a spin lock, writes a line while holding it (a
 * system call), and lets go; a waiter spins on the lock with no system call.
 * Under schedule 0 the holder finishes first. A schedule that switches at the
 * holder's write leaves the waiter spinning forever: nothing preempts a
 * thread that makes no system call, so the check's own time limit ends it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int lock, taken;

static void *holder(void *arg)
{
    while (atomic_exchange(&lock, 1))
        ;
    atomic_store(&taken, 1);
    write(1, "holder has the lock\n", 20);
    atomic_store(&lock, 0);
    return arg;
}

static void *waiter(void *arg)
{
    while (!atomic_load(&taken))
        sched_yield(); /* wait for the holder to have taken it */
    while (atomic_load(&lock))
        ; /* spin, with no system call */
    write(1, "waiter saw it released\n", 23);
    return arg;
}

int main(void)
{
    pthread_t h, w;
    pthread_create(&w, 0, waiter, 0);
    pthread_create(&h, 0, holder, 0);
    pthread_join(h, 0);
    pthread_join(w, 0);
    puts("done");
    return 0;
}
