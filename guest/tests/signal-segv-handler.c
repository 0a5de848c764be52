// A SIGSEGV handler that fixes the page and returns: the faulting write
// re-executes and lands. The handler checks si_code, si_addr and the
// sigcontext's err/trapno/cr2. Then a read of an unmapped page (SEGV_MAPERR)
// is escaped with siglongjmp, which restores the signal mask; and SIGFPE
// from a division by zero and SIGTRAP from int3 reach handlers too.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"

static char *page;
static volatile int faults, code;
static volatile uintptr_t addr;
static volatile long err, trapno, cr2;

static void fix_page(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    faults++;
    code = si->si_code;
    addr = (uintptr_t)si->si_addr;
    err = uc->uc_mcontext.gregs[REG_ERR];
    trapno = uc->uc_mcontext.gregs[REG_TRAPNO];
    cr2 = uc->uc_mcontext.gregs[REG_CR2];
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
}

static sigjmp_buf escape;
static void jump_out(int sig, siginfo_t *si, void *ctx) {
    faults++;
    code = si->si_code;
    addr = (uintptr_t)si->si_addr;
    siglongjmp(escape, sig);
}

static volatile int fpe_code, trap_hit;
static volatile uintptr_t fpe_addr;
static void on_fpe(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    fpe_code = si->si_code;
    fpe_addr = (uintptr_t)si->si_addr;
    // Skip the 2-byte `idiv %ecx`... not portable: escape instead.
    (void)uc;
    siglongjmp(escape, sig);
}
static void on_trap(int sig) { trap_hit++; }

// Skips the faulting ud2 by editing the saved rip: sigreturn takes it.
static volatile int ill_code;
static void skip_ud2(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    ill_code = si->si_code;
    uc->uc_mcontext.gregs[REG_RIP] += 2;
    uc->uc_mcontext.gregs[REG_RAX] = 1234;
}

int main(void) {
    page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fix_page;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);

    volatile char *p = page + 123;
    *p = 42; // faults once; the handler makes the page writable; the write re-executes
    CHECK(faults == 1 && page[123] == 42, "the write landed after the handler fixed the page");
    CHECK(code == SEGV_ACCERR && addr == (uintptr_t)page + 123,
          "si_code=%d (SEGV_ACCERR) si_addr=page+%ld", code, (long)(addr - (uintptr_t)page));
    CHECK(trapno == 14 && (err & 2) && (err & 4) && cr2 == (long)page + 123,
          "sigcontext: trapno=%ld err=%#lx (write, user) cr2=page+%ld", trapno, err,
          cr2 - (long)page);

    sa.sa_sigaction = jump_out;
    sigaction(SIGSEGV, &sa, NULL);
    char *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole, 4096);
    faults = 0;
    if (sigsetjmp(escape, 1) == 0) {
        volatile char c = *(volatile char *)(hole + 8);
        (void)c;
        CHECK(0, "reading an unmapped page went on");
    }
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(faults == 1 && code == SEGV_MAPERR && addr == (uintptr_t)hole + 8,
          "unmapped read: si_code=%d (SEGV_MAPERR), si_addr=hole+%ld", code,
          (long)(addr - (uintptr_t)hole));
    CHECK(!sigismember(&now, SIGSEGV), "siglongjmp out of the handler restored the mask");

    // And again: the handler works a second time.
    if (sigsetjmp(escape, 1) == 0) {
        *(volatile int *)0 = 1;
    }
    CHECK(faults == 2 && addr == 0, "a NULL write faults into the handler again");

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fpe;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGFPE, &sa, NULL);
    volatile int zero = 0;
    if (sigsetjmp(escape, 1) == 0) {
        volatile int x = 7 / zero;
        (void)x;
    }
    CHECK(fpe_code == FPE_INTDIV && fpe_addr != 0, "7/0: SIGFPE with si_code=%d (FPE_INTDIV)",
          fpe_code);

    signal(SIGTRAP, on_trap);
    __asm__ volatile("int3");
    CHECK(trap_hit == 1, "int3: the SIGTRAP handler ran and the program went on");

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = skip_ud2;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &sa, NULL);
    long rax = 0;
    __asm__ volatile("xor %%eax, %%eax\n\t ud2" : "=a"(rax));
    CHECK(ill_code == ILL_ILLOPN && rax == 1234,
          "ud2: SIGILL, and the handler's edits of rip and rax took effect");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
