/* timers: alarm() interrupts pause(); a periodic setitimer ticks five times
 * into a SIGALRM handler; getitimer and alarm report what is left; with
 * argument "die", an alarm with no handler ends the process (SIGALRM). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks;

static void on_alarm(int sig)
{
    (void)sig;
    ticks++;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "die") == 0) {
        alarm(2);
        pause();
        return 3; /* not reached: SIGALRM's default action ends the process */
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, 0);

    alarm(5);
    unsigned left = alarm(3); /* replaces it; about 5 s were left */
    int r = pause();
    printf("pause=%d errno=%s ticks=%d left=%u\n", r, strerror(errno), ticks, left);

    struct itimerval it = {{0, 100000}, {0, 100000}}; /* every 100 ms */
    setitimer(ITIMER_REAL, &it, 0);
    while (ticks < 6)
        pause();
    struct itimerval now;
    getitimer(ITIMER_REAL, &now);
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, 0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("ticks=%d interval=%ldus armed=%d\n", ticks, (long)now.it_interval.tv_usec,
           now.it_value.tv_sec > 0 || now.it_value.tv_usec > 0);
    return 0;
}
