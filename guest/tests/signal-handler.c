// A handler runs and returns: SA_SIGINFO with si_signo, si_code, si_pid and
// the ucontext checked inside the handler; a blocked signal stays pending
// until it is unmasked; SIG_IGN drops a signal; SA_RESETHAND and SA_NODEFER;
// sigsuspend and sigwaitinfo. Prints one line per check and exits 0 when
// every check held (1 otherwise).
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"

static volatile int hits, last_signo, last_code, last_pid, mask_had_self;
static volatile unsigned long rsp_mod16;

static void on_usr1(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    // The compiler trusts the ABI's stack alignment at entry (rsp+8 16-aligned).
    char aligned[16] __attribute__((aligned(16)));
    __asm__ volatile("" : : "r"(aligned) : "memory");
    hits++;
    last_signo = si->si_signo;
    last_code = si->si_code;
    last_pid = si->si_pid;
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    mask_had_self = sigismember(&now, sig);
    // The interrupted code's mask is in the frame: SIGUSR1 was not blocked there.
    if (sigismember(&uc->uc_sigmask, SIGUSR1))
        mask_had_self = -1;
    rsp_mod16 = (unsigned long)aligned & 15;
}

static volatile int plain_hits;
static void plain(int sig) { plain_hits += sig; }

static volatile int nested_depth, max_depth, raises_left;
static void nodefer(int sig) {
    nested_depth++;
    if (nested_depth > max_depth)
        max_depth = nested_depth;
    if (raises_left-- > 0)
        raise(sig);
    nested_depth--;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);

    kill(getpid(), SIGUSR1);
    CHECK(hits == 1, "kill(self) ran the handler once (hits=%d)", hits);
    CHECK(last_signo == SIGUSR1 && last_code == SI_USER && last_pid == getpid(),
          "kill: si_signo=%d si_code=%d si_pid=%d", last_signo, last_code, last_pid);
    CHECK(mask_had_self == 1, "the signal is blocked inside its handler, not in uc_sigmask (%d)",
          mask_had_self);

    CHECK(rsp_mod16 == 0, "the handler's stack is aligned as the ABI says");

    syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1);
    CHECK(hits == 2 && last_code == SI_TKILL, "tgkill(self): si_code=%d (SI_TKILL)", last_code);

    raise(SIGUSR1);
    CHECK(hits == 3, "raise ran the handler (hits=%d)", hits);

    // Blocked: pending until unmasked.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    kill(getpid(), SIGUSR1);
    kill(getpid(), SIGUSR1); // a standard signal is pending once
    sigset_t pend;
    sigpending(&pend);
    CHECK(hits == 3 && sigismember(&pend, SIGUSR1), "blocked SIGUSR1 is pending, not delivered");
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    CHECK(hits == 4, "unblocking delivers it, once (hits=%d)", hits);
    sigpending(&pend);
    CHECK(!sigismember(&pend, SIGUSR1), "nothing pending after delivery");

    // SIG_IGN drops it, even while blocked-then-ignored.
    signal(SIGUSR2, SIG_IGN);
    kill(getpid(), SIGUSR2);
    CHECK(1, "SIG_IGN: SIGUSR2 to self did nothing");
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    kill(getpid(), SIGUSR1);
    signal(SIGUSR1, SIG_IGN);
    sigpending(&pend);
    CHECK(!sigismember(&pend, SIGUSR1), "setting SIG_IGN discards a pending signal");
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    CHECK(hits == 4, "and it never runs (hits=%d)", hits);

    // A default-ignore signal does nothing.
    raise(SIGCHLD);
    raise(SIGWINCH);
    CHECK(1, "SIGCHLD and SIGWINCH by default are ignored");

    // SA_RESETHAND: the second one gets the default (ignored here: SIGURG).
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGURG, &sa, NULL);
    raise(SIGURG);
    raise(SIGURG);
    struct sigaction now;
    sigaction(SIGURG, NULL, &now);
    CHECK(plain_hits == SIGURG && now.sa_handler == SIG_DFL,
          "SA_RESETHAND: handled once, then SIG_DFL (plain_hits=%d)", plain_hits);

    // SA_NODEFER: the handler can be re-entered by its own signal.
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nodefer;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGALRM, &sa, NULL);
    raises_left = 2;
    raise(SIGALRM);
    CHECK(max_depth == 3, "SA_NODEFER nests the handler (depth %d)", max_depth);
    sa.sa_flags = 0;
    max_depth = 0;
    raises_left = 2;
    sigaction(SIGALRM, &sa, NULL);
    raise(SIGALRM);
    CHECK(max_depth == 1, "without it the signal waits for the handler (depth %d)", max_depth);

    // sa_mask blocks others during the handler; they run after.
    // sigsuspend: wait with the signal unblocked; the old mask comes back.
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    raise(SIGUSR1);
    sigset_t empty;
    sigemptyset(&empty);
    int r = sigsuspend(&empty);
    int e = errno;
    sigset_t after;
    sigprocmask(SIG_BLOCK, NULL, &after);
    CHECK(r == -1 && e == EINTR && hits == 5 && sigismember(&after, SIGUSR1),
          "sigsuspend: EINTR after the handler, mask restored (hits=%d)", hits);

    // sigwaitinfo takes a blocked signal without a handler running.
    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGUSR1, v);
    sigset_t want;
    sigemptyset(&want);
    sigaddset(&want, SIGUSR1);
    siginfo_t si;
    int got = sigwaitinfo(&want, &si);
    CHECK(got == SIGUSR1 && si.si_code == SI_QUEUE && si.si_value.sival_int == 42 && hits == 5,
          "sigwaitinfo: SIGUSR1 from sigqueue, value %d", si.si_value.sival_int);
    struct timespec zero = {0, 0};
    got = sigtimedwait(&want, &si, &zero);
    CHECK(got == -1 && errno == EAGAIN, "sigtimedwait with nothing pending: EAGAIN");

    // Real-time signals queue: three sent while blocked run three times.
    int rt = SIGRTMIN + 2;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain;
    sigaction(rt, &sa, NULL);
    sigset_t rtset;
    sigemptyset(&rtset);
    sigaddset(&rtset, rt);
    sigprocmask(SIG_BLOCK, &rtset, NULL);
    plain_hits = 0;
    for (int i = 0; i < 3; i++)
        sigqueue(getpid(), rt, v);
    sigprocmask(SIG_UNBLOCK, &rtset, NULL);
    CHECK(plain_hits == 3 * rt, "three queued real-time signals ran three times (%d)", plain_hits / rt);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
