/* insn-fuzz SEED ROUNDS: hostile ring-3 instruction streams. Each round forks
 * a child that writes a short machine-code sequence into a fresh page (below
 * 4 GiB, so a far jump to the 32-bit code segment can land in it) and runs
 * it: random registers, then a few instructions of the round's class, then
 * ud2. The parent prints how each child ended ("round N CLASS: signal S" or
 * "exit S"), so a run under Rewind can be compared line by line with the
 * same program run directly on Linux. The classes: in/out on every port and
 * size, int N for every vector, int3/int1/into, undefined opcodes, syscall
 * and sysenter with random registers, far calls and jumps through crafted
 * pointers, iretq with crafted frames, sysret/sysexit, segment register
 * loads, privileged instructions, xsave/xrstor with bad masks and buffers,
 * misaligned and non-canonical addresses, self-modifying code (the next
 * instruction, and code on the stack), and the trap flag. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { C_IO, C_INT, C_UD, C_SYSCALL, C_SYSENTER, C_FAR, C_IRET, C_SYSRET, C_SEG, C_PRIV, C_XSAVE, C_ADDR, C_SMC, C_TF, NCLASS };
static const char *names[NCLASS] = { "io", "int", "ud", "syscall", "sysenter", "far", "iret", "sysret", "seg", "priv", "xsave", "addr", "smc", "tf" };

static uint64_t rng;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned char *code; /* the page being written */
static size_t at;
static unsigned char *data; /* 64 KiB of scratch, 64-aligned, below 4 GiB */
static char label[24];      /* what the round's output calls it: its class, or `int N` */

static void b(int n, ...)
{
    __builtin_va_list ap;
    __builtin_va_start(ap, n);
    for (int i = 0; i < n; i++)
        code[at++] = (unsigned char)__builtin_va_arg(ap, int);
    __builtin_va_end(ap);
}
static void imm32(uint32_t v) { memcpy(code + at, &v, 4); at += 4; }
static void imm64(uint64_t v) { memcpy(code + at, &v, 8); at += 8; }
/* mov r64, imm64 (reg 0-15, never 4 = rsp) */
static void movabs(int reg, uint64_t v) { b(2, 0x48 | (reg >> 3), 0xb8 | (reg & 7)); imm64(v); }
static uint64_t here(void) { return (uintptr_t)(code + at); }

static uint64_t garbage(void)
{
    switch (next() % 10) {
    case 0: return 0;
    case 1: return (uint64_t)-1;
    case 2: return 0xffffffffffff0000;       /* kernel half */
    case 3: return 0x8000000000000000;       /* not canonical */
    case 4: return 0xdead0001;               /* unmapped, unaligned */
    case 5: return (uintptr_t)data + (next() % 4096);
    case 6: return (uintptr_t)data + 8192;   /* 64-aligned scratch */
    default: return next();
    }
}

static const uint16_t selectors[] = { 0, 3, 0x08, 0x10, 0x18, 0x1b, 0x23, 0x2b, 0x33, 0x2f, 0x40, 0xfffc };
/* Whether the round named Linux's 32-bit user code segment (GDT entry 4,
 * selectors 0x20-0x23), which Rewind leaves out: its label says so. */
static int compat;
static uint16_t selector(void)
{
    uint16_t s = next() % 4 == 0 ? (uint16_t)next() : selectors[next() % (sizeof selectors / 2)];
    if ((s & 0xfffc) == 0x20)
        compat = 1;
    return s;
}

static void random_registers(void)
{
    for (int r = 0; r < 16; r++)
        if (r != 4 && next() % 2)
            movabs(r, garbage());
}

static void io(void)
{
    static const unsigned char ops[] = { 0xec, 0xed, 0xee, 0xef, 0x6c, 0x6d, 0x6e, 0x6f };
    b(1, 0xba); imm32((uint32_t)next() & 0xffff); /* mov edx, port */
    switch (next() % 3) {
    case 0: b(2, 0xe4 + next() % 4, (int)(next() & 0xff)); break; /* in/out imm8 */
    case 1: b(2, 0x66, ops[next() % 8]); break;                   /* 16-bit */
    default: b(1, ops[next() % 8]); break;
    }
}

static void interrupt(int round)
{
    int v = (round / NCLASS) % 256;
    switch (next() % 6) {
    case 0: b(1, 0xcc); break; /* int3 */
    case 1: b(1, 0xf1); break; /* int1 */
    case 2: b(1, 0xce); break; /* into: undefined in 64-bit mode */
    default:
        if (v == 0x80)
            b(5, 0xb8, 0x00, 0x00, 0xff, 0x7f); /* mov eax, 0x7fff0000: no such call */
        b(2, 0xcd, v);
        snprintf(label, sizeof label, "int %d", v);
    }
}

static void undefined(void)
{
    switch (next() % 8) {
    case 0: b(2, 0x0f, 0x0b); break;       /* ud2 */
    case 1: b(3, 0x0f, 0xff, 0xc0); break; /* ud0 */
    case 2: b(3, 0x0f, 0xb9, 0xc0); break; /* ud1 */
    case 3: b(1, 0xd6); break;             /* salc */
    case 4: b(1, 0x06 + (int)(next() % 2)); break; /* push/pop es */
    case 5: b(1, 0x60); break;             /* pusha */
    case 6: b(2, 0xf0, 0x90); break;       /* lock nop */
    default: b(1, 0x9a); imm32(0); b(2, 0x33, 0); break; /* call far ptr16:32 */
    }
}

/* A few system calls that neither block nor end the parent, with random
 * arguments; or numbers no kernel has. */
static void syscall_random(void)
{
    static const uint32_t calls[] = { 39, 186, 24, 63, 79, 201, 228, 96, 12, 28, 10, 11, 14, 13, 158, 157, 231, 60 };
    uint64_t nr;
    switch (next() % 4) {
    case 0: nr = 1000 + next() % 100000; break;
    case 1: nr = 0x40000000 | (next() % 600); break; /* x32 */
    case 2: nr = next(); break;
    default: nr = calls[next() % (sizeof calls / 4)];
    }
    movabs(0, nr);
    b(2, 0x0f, 0x05);
}

/* Whether the round made a far transfer through memory with REX.W: AMD
 * CPUs ignore it (m16:32), Intel's read m16:64. Its label says so. */
static int rexw;

static void far(void)
{
    uint64_t *ptr = (uint64_t *)(data + 256);
    uint64_t target = next() % 4 ? here() + 16 : garbage();
    ptr[0] = next() % 2 ? target : (uint32_t)target;
    ((uint16_t *)ptr)[next() % 2 ? 4 : 2] = selector();
    movabs(0, (uintptr_t)ptr);                           /* 10 bytes */
    static const unsigned char modrm[] = { 0x18, 0x28 }; /* call far, jmp far [rax] */
    if (next() % 2) {
        b(3, 0x48, 0xff, modrm[next() % 2]);
        rexw = 1;
    } else
        b(3, 0x90, 0xff, modrm[next() % 2]);
    /* here() + 16 from the movabs lands after this padding */
    b(3, 0x90, 0x90, 0x90);
}

static void iret(void)
{
    static const uint64_t flags[] = { 0x100, 0x40000, 0x4000, 0x3000, 0x20000, 0x400, 0x10000, 0x200000, 0x80 };
    uint64_t *f = (uint64_t *)(data + 1024);
    uint64_t rflags = 0x202;
    for (int i = 0; i < 3; i++)
        if (next() % 2)
            rflags |= flags[next() % 9];
    f[1] = next() % 3 ? 0x33 : selector();
    f[2] = next() % 8 ? rflags : next();
    f[3] = next() % 6 ? (uintptr_t)(data + 4000) : garbage();
    f[4] = next() % 3 ? 0x2b : selector();
    movabs(0, (uintptr_t)f);
    b(3, 0x48, 0x89, 0xc4);     /* mov rsp, rax */
    f[0] = next() % 5 ? here() + 2 : garbage();
    b(2, 0x48, 0xcf);           /* iretq */
    b(3, 0x8b, 0x44, 0x24); b(1, 0x01); /* mov eax, [rsp+1]: misaligned, for AC */
}

static void sysret(void)
{
    switch (next() % 3) {
    case 0: b(3, 0x48, 0x0f, 0x07); break; /* sysretq */
    case 1: b(2, 0x0f, 0x07); break;       /* sysretl */
    default: b(2, 0x0f, 0x35); break;      /* sysexit */
    }
}

static void segment(void)
{
    static const unsigned char sreg[] = { 0xd8, 0xc0, 0xe0, 0xe8, 0xd0, 0xc8 }; /* ds es fs gs ss cs */
    b(2, 0x66, 0xb8); code[at++] = 0; code[at++] = 0;
    uint16_t sel = selector();
    memcpy(code + at - 2, &sel, 2);             /* mov ax, sel */
    switch (next() % 3) {
    case 0: b(2, 0x8e, sreg[next() % 6]); break; /* mov sreg, ax */
    case 1: b(3, 0x50, 0x0f, next() % 2 ? 0xa1 : 0xa9); break; /* push rax; pop fs/gs */
    default: b(3, 0x0f, 0x00, 0xd0 + (int)(next() % 2) * 8); /* lldt/ltr ax */
    }
    /* Use it: a load through fs or gs. */
    b(9, next() % 2 ? 0x64 : 0x65, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0);
}

static void privileged(void)
{
    movabs(0, (uintptr_t)data + 512);
    switch (next() % 16) {
    case 0: b(2, 0x0f, 0x30); break;       /* wrmsr */
    case 1: b(2, 0x0f, 0x32); break;       /* rdmsr */
    case 2: b(3, 0x0f, 0x22, 0xc0 | (int)(next() % 5) << 3); break; /* mov crN, rax */
    case 3: b(3, 0x0f, 0x20, 0xc0 | (int)(next() % 5) << 3); break; /* mov rax, crN */
    case 4: b(3, 0x0f, 0x23, 0xc0 | (int)(next() % 8) << 3); break; /* mov drN, rax */
    case 5: b(1, 0xf4); break;             /* hlt */
    case 6: b(3, 0x0f, 0x01, 0x10); break; /* lgdt [rax] */
    case 7: b(3, 0x0f, 0x01, 0x18); break; /* lidt [rax] */
    case 8: b(2, 0x0f, 0x06); break;       /* clts */
    case 9: b(2, 0x0f, 0x08); break;       /* invd */
    case 10: b(2, 0x0f, 0x09); break;      /* wbinvd */
    case 11: b(3, 0x0f, 0x01, 0x38); break; /* invlpg [rax] */
    case 12: b(1, next() % 2 ? 0xfa : 0xfb); break; /* cli/sti */
    case 13: b(3, 0x0f, 0x01, 0xf8); break; /* swapgs */
    case 14: b(3, 0x0f, 0x01, 0xf0); break; /* lmsw ax */
    default: b(3, 0x44, 0x0f, 0x22); b(1, 0xc0); /* mov cr8, rax */
    }
}

static void xsave(void)
{
    unsigned char *buf = data + 8192 + (next() % 4 ? 0 : 1 + next() % 63);
    if (next() % 2)
        for (int i = 0; i < 4096; i++)
            buf[i] = (unsigned char)next();
    movabs(3, (uintptr_t)buf);             /* rbx */
    movabs(0, next() % 2 ? next() : (uint64_t)-1); /* eax */
    movabs(2, next() % 2 ? next() : (uint64_t)-1); /* edx */
    switch (next() % 8) {
    case 0: b(3, 0x0f, 0xae, 0x23); break;       /* xsave [rbx] */
    case 1: b(3, 0x0f, 0xae, 0x2b); break;       /* xrstor [rbx] */
    case 2: b(3, 0x0f, 0xae, 0x33); break;       /* xsaveopt [rbx] */
    case 3: b(3, 0x0f, 0xc7, 0x1b); break;       /* xrstors [rbx] */
    case 4: b(3, 0x0f, 0xc7, 0x2b); break;       /* xsaves [rbx] */
    case 5: movabs(1, next() % 4); b(3, 0x0f, 0x01, 0xd0); break; /* xgetbv */
    case 6: b(3, 0x0f, 0x01, 0xd1); break;       /* xsetbv */
    default: b(3, 0x0f, 0xae, 0x0b); break;      /* fxrstor [rbx] */
    }
}

static void address(void)
{
    movabs(0, garbage());
    switch (next() % 7) {
    case 0: b(3, 0x48, 0x8b, 0x00); break;       /* mov rax, [rax] */
    case 1: b(3, 0x48, 0x89, 0x18); break;       /* mov [rax], rbx */
    case 2: b(3, 0x0f, 0x28, 0x00); break;       /* movaps xmm0, [rax] */
    case 3: b(2, 0xff, 0xe0); break;             /* jmp rax */
    case 4: b(3, 0x48, 0x89, 0xc4); b(1, 0x50); break; /* mov rsp, rax; push rax */
    case 5: b(2, 0xff, 0xd0); break;             /* call rax */
    default:                                     /* AC on, then a misaligned load */
        b(9, 0x9c, 0x48, 0x81, 0x0c, 0x24, 0x00, 0x00, 0x04, 0x00); /* pushfq; or qword [rsp], 0x40000 */
        b(1, 0x9d);                                                 /* popfq */
        movabs(0, (uintptr_t)data + 1);
        b(2, 0x8b, 0x00);                                           /* mov eax, [rax] */
    }
}

static void smc(void)
{
    switch (next() % 3) {
    case 0: /* the next byte, a nop, becomes int3 (or ud2's first byte) */
        b(2, 0xc6, 0x05); imm32(0); b(1, next() % 2 ? 0xcc : 0x0f);
        b(3, 0x90, 0x0b, 0x90);
        break;
    case 1: /* ud2 written to the stack and run there */
        b(8, 0xc7, 0x44, 0x24, 0xf0, 0x0f, 0x0b, 0x0f, 0x0b); /* mov dword [rsp-16], 0x0b0f0b0f */
        b(5, 0x48, 0x8d, 0x44, 0x24, 0xf0);                   /* lea rax, [rsp-16] */
        b(2, 0xff, 0xe0);                                     /* jmp rax */
        break;
    default: { /* a loop that rewrites its own exit */
        b(2, 0xb1, (int)(1 + next() % 8));       /* mov cl, n */
        size_t top = at;
        b(2, 0xfe, 0xc9);                        /* dec cl */
        b(2, 0x75, 0x00);                        /* jnz top */
        code[at - 1] = (unsigned char)(top - at);
        b(2, 0xc6, 0x05); imm32(0); b(1, 0xf4);  /* the next byte becomes hlt */
        b(1, 0x90);
    }
    }
}

static void trap_flag(void)
{
    b(9, 0x9c, 0x48, 0x81, 0x0c, 0x24, 0x00, 0x01, 0x00, 0x00); /* pushfq; or qword [rsp], 0x100 */
    b(1, 0x9d);                                                 /* popfq */
    b(2, 0x90, 0x90);
}

static void seed_round(uint64_t seed, int r)
{
    rng = (seed * 0x9e3779b97f4a7c15) ^ ((uint64_t)r * 0xbf58476d1ce4e5b9) ^ 0x94d049bb133111eb;
    for (int i = 0; i < 4; i++)
        next();
    at = 0;
}

static int map_pages(void)
{
    code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    data = mmap(0, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    return code != MAP_FAILED && data != MAP_FAILED;
}

static void build(int round)
{
    int class = round % NCLASS;
    snprintf(label, sizeof label, "%s", names[class]);
    compat = 0;
    rexw = 0;
    random_registers();
    int n = 1 + (int)(next() % 3);
    for (int i = 0; i < n && at < 3800; i++) {
        switch (class) {
        case C_IO: io(); break;
        case C_INT: interrupt(round); break;
        case C_UD: undefined(); break;
        case C_SYSCALL: syscall_random(); break;
        case C_SYSENTER: b(2, 0x0f, 0x34); break;
        case C_FAR: far(); break;
        case C_IRET: iret(); break;
        case C_SYSRET: sysret(); break;
        case C_SEG: segment(); break;
        case C_PRIV: privileged(); break;
        case C_XSAVE: xsave(); break;
        case C_ADDR: address(); break;
        case C_SMC: smc(); break;
        default: trap_flag();
        }
    }
    b(2, 0x0f, 0x0b); /* ud2: every stream ends in a signal */
    if (rexw || compat)
        snprintf(label, sizeof label, "%s%s%s", names[class], rexw ? " rex.w" : "",
                 compat ? " compat" : "");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: insn-fuzz SEED ROUNDS [FIRST [dump]]\n");
        return 2;
    }
    uint64_t seed = strtoull(argv[1], 0, 0);
    int rounds = atoi(argv[2]);
    int first = argc > 3 ? atoi(argv[3]) : 0;
    int dump = argc > 4;
    if (!map_pages())
        return 3;
    for (int r = first; r < first + rounds; r++) {
        /* The same stream as the child's, built here only for its label. */
        seed_round(seed, r);
        build(r);
        seed_round(seed, r);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 3;
        }
        if (pid == 0) {
            if (!map_pages())
                _exit(100);
            alarm(5);
            build(r);
            if (dump) { /* the stream, in hex, to reproduce a round */
                for (size_t i = 0; i < at; i++)
                    fprintf(stderr, "%02x%s", code[i], i + 1 < at ? " " : "\n");
            }
            ((void (*)(void))code)();
            _exit(101); /* not reached: the stream ends in ud2 */
        }
        int status;
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 3;
        }
        if (WIFSIGNALED(status))
            printf("round %d %s: signal %d\n", r, label, WTERMSIG(status));
        else
            printf("round %d %s: exit %d\n", r, label, WEXITSTATUS(status));
    }
    printf("insn-fuzz: %d rounds\n", rounds);
    return 0;
}
