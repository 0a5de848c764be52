// Two threads each wait to read what the other will write only after its
// own read: every thread blocks on a pipe, and the run ends `deadlocked`,
// naming both reads.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static int ping[2], pong[2];

static void *other(void *arg) {
    (void)arg;
    char c;
    read(ping[0], &c, 1);
    write(pong[1], "o", 1);
    return 0;
}

int main(void) {
    pthread_t t;
    pipe(ping);
    pipe(pong);
    printf("each side waits for the other\n");
    fflush(stdout);
    pthread_create(&t, 0, other, 0);
    char c;
    read(pong[0], &c, 1);
    write(ping[1], "i", 1);
    pthread_join(t, 0);
    return 0;
}
