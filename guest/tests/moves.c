/* moves: every form of plain move (mov, movzx, movsx, movsxd; 1, 2, 4 and 8
 * bytes; loads into registers whose other bits must be kept or cleared,
 * stores of registers, high-byte registers and sign-extended immediates)
 * on a page a second thread has made shared. Under `--points memory` each
 * of them is a memory point that the monitor completes in the guest's place
 * (kernel/points.rs `perform_access`): the lines printed must be those of
 * the same program run natively. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

static volatile uint8_t buf[64] __attribute__((aligned(64)));
static volatile int ready;

static void *toucher(void *arg)
{
    (void)arg;
    buf[63] = 1;
    ready = 1;
    return 0;
}

#define SHOW(name, v) printf("%-28s %016llx\n", name, (unsigned long long)(v))

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, toucher, 0);
    while (!ready)
        ;
    volatile uint8_t *p = buf;
    uint64_t r;

    /* Stores: 8, 4, 2 and 1 bytes of a register, a high byte, immediates. */
    uint64_t v = 0x1122334455667788ull;
    __asm__ volatile("movq %1, (%0)" ::"r"(p), "r"(v) : "memory");
    __asm__ volatile("movl %k1, 8(%0)" ::"r"(p), "r"(v) : "memory");
    __asm__ volatile("movw %w1, 12(%0)" ::"r"(p), "r"(v) : "memory");
    __asm__ volatile("movb %b1, 14(%0)" ::"r"(p), "r"(v) : "memory");
    __asm__ volatile("movb %%ah, 15(%0)" ::"r"(p), "a"(v) : "memory");
    __asm__ volatile("movq $-2, 16(%0)" ::"r"(p) : "memory");
    __asm__ volatile("movl $0x89abcdef, 24(%0)" ::"r"(p) : "memory");
    __asm__ volatile("movw $0x8001, 28(%0)" ::"r"(p) : "memory");
    __asm__ volatile("movb $0x90, 30(%0)" ::"r"(p) : "memory");
    __asm__ volatile("movb $0x7f, buf+31(%%rip)" ::: "memory");
    for (int i = 0; i < 32; i += 8) {
        uint64_t w = 0;
        for (int j = 7; j >= 0; j--)
            w = (w << 8) | p[i + j];
        printf("stored %2d                    %016llx\n", i, (unsigned long long)w);
    }

    /* Loads: what each leaves in the rest of its register. */
    r = ~0ull;
    __asm__ volatile("movq (%1), %0" : "+r"(r) : "r"(p));
    SHOW("movq", r);
    r = ~0ull;
    __asm__ volatile("movl 16(%1), %k0" : "+r"(r) : "r"(p));
    SHOW("movl (clears the upper half)", r);
    r = ~0ull;
    __asm__ volatile("movw 24(%1), %w0" : "+r"(r) : "r"(p));
    SHOW("movw (keeps the rest)", r);
    r = ~0ull;
    __asm__ volatile("movb 30(%1), %b0" : "+r"(r) : "r"(p));
    SHOW("movb", r);
    r = ~0ull;
    __asm__ volatile("movb 31(%1), %%ah" : "+a"(r) : "r"(p));
    SHOW("movb into ah", r);
    r = ~0ull;
    __asm__ volatile("movzbl 30(%1), %k0" : "+r"(r) : "r"(p));
    SHOW("movzbl", r);
    r = ~0ull;
    __asm__ volatile("movzwq 28(%1), %0" : "+r"(r) : "r"(p));
    SHOW("movzwq", r);
    r = ~0ull;
    __asm__ volatile("movzbw 30(%1), %w0" : "+r"(r) : "r"(p));
    SHOW("movzbw (keeps the rest)", r);
    r = 0;
    __asm__ volatile("movsbl 30(%1), %k0" : "+r"(r) : "r"(p));
    SHOW("movsbl", r);
    r = 0;
    __asm__ volatile("movsbq 30(%1), %0" : "+r"(r) : "r"(p));
    SHOW("movsbq", r);
    r = 0;
    __asm__ volatile("movswl 28(%1), %k0" : "+r"(r) : "r"(p));
    SHOW("movswl", r);
    r = 0;
    __asm__ volatile("movswq 28(%1), %0" : "+r"(r) : "r"(p));
    SHOW("movswq", r);
    r = 0;
    __asm__ volatile("movslq 24(%1), %0" : "+r"(r) : "r"(p));
    SHOW("movslq", r);
    r = 0x5555555555555555ull;
    __asm__ volatile("movsbw 30(%1), %w0" : "+r"(r) : "r"(p));
    SHOW("movsbw (keeps the rest)", r);
    register uint64_t r13 __asm__("r13") = ~0ull;
    __asm__ volatile("movl buf+8(%%rip), %k0" : "+r"(r13));
    SHOW("movl rip-relative into r13d", r13);

    pthread_join(t, 0);
    return 0;
}
