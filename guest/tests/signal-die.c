// Ways a signal ends the process, one per argument: default actions
// (term, abort, kill, from-thread), synchronous faults that kill even with a
// handler (blocked-segv, ignored-segv, segv-in-segv), frames the monitor
// cannot build or read back (no-restorer, bad-stack, bad-sigreturn), and
// stop signals, which stop the process with nobody to continue it (stop).
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void handler(int sig) { printf("handler %d\n", sig); }

static void segv_again(int sig) { *(volatile int *)8 = 1; }

static void *killer(void *arg) {
    kill(getpid(), SIGTERM);
    return NULL;
}

/* The kernel's struct sigaction, for a handler without SA_RESTORER. */
struct ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *what = argc > 1 ? argv[1] : "term";
    printf("before %s\n", what);
    if (!strcmp(what, "term")) {
        raise(SIGTERM);
    } else if (!strcmp(what, "abort")) {
        abort();
    } else if (!strcmp(what, "kill")) {
        kill(getpid(), SIGKILL);
    } else if (!strcmp(what, "from-thread")) {
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
        pthread_join(t, NULL);
    } else if (!strcmp(what, "blocked-segv")) {
        signal(SIGSEGV, handler);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGSEGV);
        sigprocmask(SIG_BLOCK, &s, NULL);
        *(volatile int *)16 = 1;
    } else if (!strcmp(what, "ignored-segv")) {
        signal(SIGSEGV, SIG_IGN);
        *(volatile int *)16 = 1;
    } else if (!strcmp(what, "segv-in-segv")) {
        signal(SIGSEGV, segv_again);
        *(volatile int *)16 = 1;
    } else if (!strcmp(what, "no-restorer")) {
        struct ksigaction ka = {.handler = handler};
        syscall(SYS_rt_sigaction, SIGUSR1, &ka, NULL, 8);
        raise(SIGUSR1);
    } else if (!strcmp(what, "bad-stack")) {
        signal(SIGUSR1, handler);
        long pid = getpid(), tid = gettid();
        // The signal arrives with rsp pointing nowhere: no frame can be written.
        __asm__ volatile("mov %%rsp, %%r12\n\t mov $16, %%rsp\n\t"
                         "mov $234, %%eax\n\t mov %0, %%rdi\n\t mov %1, %%rsi\n\t mov $10, %%edx\n\t"
                         "syscall\n\t mov %%r12, %%rsp"
                         :
                         : "r"(pid), "r"(tid)
                         : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "r12", "memory");
    } else if (!strcmp(what, "bad-sigreturn")) {
        // rt_sigreturn with no frame under rsp.
        __asm__ volatile("mov $0x1000, %%rsp\n\t mov $15, %%eax\n\t syscall" : : : "memory");
    } else if (!strcmp(what, "stop")) {
        raise(SIGSTOP);
        raise(SIGTSTP);
        raise(SIGCONT);
        printf("stop signals did nothing\n");
        return 0;
    }
    printf("after %s\n", what);
    return 3;
}
