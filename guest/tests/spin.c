/* spin: a thread computes forever without a system call; main waits for it
 * in join. Only --timeout ends the run, and the report names spin_forever. */
#include <pthread.h>
#include <stdio.h>

volatile unsigned long spins;

__attribute__((noinline)) void spin_forever(void)
{
    for (;;)
        spins++;
}

static void *spinner(void *arg)
{
    (void)arg;
    spin_forever();
    return NULL;
}

int main(void)
{
    pthread_t t;
    printf("starting the spinner\n");
    fflush(stdout);
    pthread_create(&t, NULL, spinner, NULL);
    pthread_join(t, NULL);
    return 0;
}
