// sigaltstack: a handler with SA_ONSTACK runs on the alternate stack (and
// sigaltstack inside it says SS_ONSTACK); one without runs on the normal
// stack; a stack overflow's SIGSEGV is caught on the alternate stack; and
// SS_AUTODISARM disarms the stack inside the handler.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)
#endif

#include "check.h"

#define ALT_SIZE (64 * 1024)
static char *alt;
static volatile uintptr_t where;
static volatile int flags_inside;

static int on_alt(uintptr_t a) { return a >= (uintptr_t)alt && a < (uintptr_t)alt + ALT_SIZE; }

static void handler(int sig) {
    volatile char local;
    where = (uintptr_t)&local;
    stack_t now;
    sigaltstack(NULL, &now);
    flags_inside = now.ss_flags;
}

static sigjmp_buf escape;
static volatile uintptr_t overflow_where, overflow_addr;
static void on_overflow(int sig, siginfo_t *si, void *ctx) {
    volatile char local;
    overflow_where = (uintptr_t)&local;
    overflow_addr = (uintptr_t)si->si_addr;
    siglongjmp(escape, 1);
}

static int recurse(int n) {
    if (n > (1 << 30))
        return 0;
    volatile char pad[1024];
    pad[0] = n;
    return recurse(n + 1) + pad[0];
}

int main(void) {
    alt = malloc(ALT_SIZE);
    stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack set");
    stack_t old;
    sigaltstack(NULL, &old);
    CHECK(old.ss_sp == alt && old.ss_size == ALT_SIZE && old.ss_flags == 0,
          "sigaltstack reads it back (flags %d)", old.ss_flags);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_flags = 0;
    sigaction(SIGUSR2, &sa, NULL);

    raise(SIGUSR1);
    CHECK(on_alt(where) && flags_inside == SS_ONSTACK,
          "SA_ONSTACK: the handler ran on the alternate stack, which says SS_ONSTACK (%d)",
          flags_inside);
    raise(SIGUSR2);
    CHECK(!on_alt(where) && flags_inside == 0, "without SA_ONSTACK: the normal stack");

    // A stack overflow: only the alternate stack can take the SIGSEGV.
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_overflow;
    sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(escape, 1) == 0)
        recurse(0);
    CHECK(on_alt(overflow_where) && overflow_addr != 0,
          "stack overflow: SIGSEGV handled on the alternate stack");

    // SS_AUTODISARM: inside the handler the stack is disarmed, and back after.
    ss.ss_flags = SS_AUTODISARM;
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack with SS_AUTODISARM");
    raise(SIGUSR1);
    CHECK(on_alt(where) && flags_inside == SS_DISABLE,
          "SS_AUTODISARM: on the alternate stack, which reads as disabled inside (%d)",
          flags_inside);
    sigaltstack(NULL, &old);
    CHECK(old.ss_sp == alt && (old.ss_flags & SS_AUTODISARM), "and armed again after the handler");

    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    raise(SIGUSR1);
    CHECK(!on_alt(where) && flags_inside == SS_DISABLE, "disabled: SA_ONSTACK uses the normal stack");

    ss.ss_flags = 0;
    ss.ss_size = 100;
    CHECK(sigaltstack(&ss, NULL) == -1, "a stack smaller than MINSIGSTKSZ is refused");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
