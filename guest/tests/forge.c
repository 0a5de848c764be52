/* forge: port I/O from ring 3, which Linux answers with #GP (SIGSEGV,
 * si_code SI_KERNEL, address 0). Each forgery is one that the machine must
 * not take for one of its own trampoline exits:
 *   syscall-port   `out 0x20, al` (the syscall port) from the program's code
 *   exception-port `out 0x8e, al` (the #PF port) with a made-up frame on the stack
 *   in             `in al, 0x60`
 *   other          `out 0x70, al`
 *   dx             `out dx, al` with dx = 0x20
 * With an argument, only that one runs, without a handler (the process is
 * killed). Without one, each runs under a SIGSEGV handler that prints what
 * it got and whether the saved rip is the forging instruction's. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

static sigjmp_buf back;
static volatile unsigned long expect_rip;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    unsigned long rip = uc->uc_mcontext.gregs[REG_RIP];
    printf("SIGSEGV code=%d addr=%p trapno=%lld rip %s\n", si->si_code, si->si_addr,
           (long long)uc->uc_mcontext.gregs[REG_TRAPNO],
           rip == expect_rip ? "at the instruction" : "elsewhere");
    fflush(stdout);
    siglongjmp(back, 1);
}

#define FORGE(label, setup, insn, ...)                                                \
    static void label(void)                                                            \
    {                                                                                  \
        unsigned long at;                                                              \
        __asm__ volatile("lea 1f(%%rip), %0\n\tmov %0, %1\n\t" setup "\n1:\t" insn    \
                         : "=&r"(at), "=m"(expect_rip)__VA_ARGS__);                  \
    }

FORGE(syscall_port, "mov $39, %%eax", "out %%al, $0x20", : : "rax")
FORGE(in_port, "", "in $0x60, %%al", : : "rax")
FORGE(other_port, "", "out %%al, $0x70")
FORGE(dx_port, "mov $0x20, %%edx", "out %%al, %%dx", : : "rdx")

/* A frame as the #PF stub would see it: error code, rip, cs, rflags, rsp, ss. */
static void exception_port(void)
{
    static unsigned long frame[6];
    unsigned long at;
    frame[0] = 0;
    frame[1] = 0x1234; /* the rip a forger would like to resume at */
    frame[2] = 0x33; /* the user selectors, as Linux has them */
    frame[3] = 0x202;
    frame[4] = 0x4000;
    frame[5] = 0x2b;
    __asm__ volatile("lea 1f(%%rip), %0\n\tmov %0, %1\n\t"
                     "mov %%rsp, %%r12\n\tmov %2, %%rsp\n"
                     "1:\tout %%al, $0x8e\n\tmov %%r12, %%rsp"
                     : "=&r"(at), "=m"(expect_rip)
                     : "r"(frame)
                     : "r12", "memory");
}

/* A jump to the syscall entry itself (its page is user-readable, as PVM
 * needs) with a made-up R11 asking for IOPL 3: a system call like any
 * other, and the flags come back without IOPL. */
static void jump_to_entry(void)
{
    unsigned long pid, flags;
    __asm__ volatile("mov $39, %%eax\n\tlea 1f(%%rip), %%rcx\n\tmov $0x3202, %%r11\n\t"
                     "mov $0x1000, %%rdx\n\tjmp *%%rdx\n1:\tpushf\n\tpop %1"
                     : "=a"(pid), "=r"(flags)
                     :
                     : "rcx", "r11", "rdx", "memory");
    printf("entry jump: pid %lu, iopl %lu\n", pid, (flags >> 12) & 3);
}

static const struct {
    const char *name;
    void (*fn)(void);
} forgeries[] = {
    {"syscall-port", syscall_port}, {"exception-port", exception_port}, {"in", in_port},
    {"other", other_port},          {"dx", dx_port},
};

int main(int argc, char **argv)
{
    int n = sizeof forgeries / sizeof forgeries[0];
    if (argc > 1) {
        for (int i = 0; i < n; i++)
            if (!strcmp(argv[1], forgeries[i].name)) {
                printf("forging %s\n", argv[1]);
                fflush(stdout);
                forgeries[i].fn();
                printf("survived %s\n", argv[1]);
                return 0;
            }
        return 2;
    }
    /* The exception-port forgery points rsp at its made-up frame: the
     * handler runs on its own stack. */
    static char altstack[64 << 10];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, 0);
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK};
    sigaction(SIGSEGV, &sa, 0);
    for (int i = 0; i < n; i++) {
        printf("%s: ", forgeries[i].name);
        if (!sigsetjmp(back, 1)) {
            forgeries[i].fn();
            printf("no signal\n");
        }
    }
    jump_to_entry();
    printf("done\n");
    return 0;
}
