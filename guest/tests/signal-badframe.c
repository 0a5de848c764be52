// Garbage in signal frames: a handler scribbles over parts of its own frame
// (the fpstate pointer, the XSAVE image's MXCSR, fpx_sw_bytes, magic words
// and header, the mask, the alternate stack, arithmetic flags, a
// non-canonical rip)
// and returns. rt_sigreturn either restores something sane or gives
// SIGSEGV, whose handler jumps back for the next round. The monitor must
// survive every round; the program prints how the rounds ended.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define ROUNDS 400

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static sigjmp_buf escape;
static volatile int segv_kernel, other_faults;

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    if (sig == SIGSEGV && si->si_code == SI_KERNEL)
        segv_kernel++;
    else
        other_faults++;
    siglongjmp(escape, 1);
}

static void scribble(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    uint8_t *fp = (uint8_t *)uc->uc_mcontext.fpregs;
    uint64_t r = next();
    uint32_t size = fp ? *(uint32_t *)(fp + 464 + 16) : 0;
    switch (r % 14) {
    case 0: uc->uc_mcontext.fpregs = (void *)next(); break;
    case 1: uc->uc_mcontext.fpregs = (void *)(fp + 1 + next() % 63); break;
    case 2: *(uint32_t *)(fp + 24) = (uint32_t)next(); break;           // MXCSR
    case 3: *(uint32_t *)(fp + 464 + 4 * (next() % 5)) = next(); break; // fpx_sw_bytes
    case 4: if (size) *(uint32_t *)(fp + size) = next(); break;         // FP_XSTATE_MAGIC2
    case 5: *(uint64_t *)(fp + 512) = next(); break;                    // XSTATE_BV
    case 6: *(uint64_t *)(fp + 520 + 8 * (next() % 7)) = next(); break; // XCOMP_BV, reserved
    case 7: memset(&uc->uc_sigmask, 0xff, 8); break;
    case 8: uc->uc_stack.ss_sp = (void *)next(); uc->uc_stack.ss_size = next();
            uc->uc_stack.ss_flags = (int)next(); break;
    case 9: uc->uc_mcontext.gregs[REG_EFL] ^= next() & 0x8d5; break; // arithmetic flags
    case 10: uc->uc_mcontext.gregs[REG_RIP] = next() | (1ull << 62); break;
    case 11: uc->uc_mcontext.fpregs = NULL; break;
    case 12: for (int i = 32; i < 512 && fp; i += 8) *(uint64_t *)(fp + i) = next(); break;
    case 13: uc->uc_mcontext.fpregs = (void *)0x10000; break;
    }
}

static void reset_fpu(void) {
    uint32_t mx = 0x1f80;
    uint16_t cw = 0x37f;
    __asm__ volatile("ldmxcsr %0\n\t fldcw %1" : : "m"(mx), "m"(cw));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
    sa.sa_sigaction = scribble;
    sigaction(SIGUSR1, &sa, NULL);
    int returned = 0;
    for (volatile int i = 0; i < ROUNDS; i++) {
        if (sigsetjmp(escape, 1) == 0) {
            raise(SIGUSR1);
            returned++;
        }
        reset_fpu();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
    }
    printf("rounds %d: returned %d, bad frame %d, other faults %d\n", ROUNDS, returned,
           segv_kernel, other_faults);
    printf("survived\n");
    return 0;
}
