/* vector: two threads each load their own pattern into the vector registers,
 * then switch to each other 1000 times (sched_yield) and check after every
 * switch that the registers still hold their pattern. The whole loop is one
 * asm block, so nothing but the switches can touch the registers.
 *   vector avx2     ymm0-ymm14 (ymm15 is the comparison scratch)
 *   vector avx512   zmm0-zmm31 (k1 is the comparison scratch)
 * Exits 1 if any register changed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SWITCHES 1000

struct job {
    int id;
    int avx512;
    long left; /* iterations left when a register was found changed; 0 if none */
    _Alignas(64) uint8_t pattern[32][64];
};

#define LOAD_Y(i) "vmovdqu " #i "*64(%[p]), %%ymm" #i "\n\t"
#define CHECK_Y(i)                                                   \
    "vpcmpeqb " #i "*64(%[p]), %%ymm" #i ", %%ymm15\n\t"             \
    "vpmovmskb %%ymm15, %%eax\n\t"                                   \
    "cmp $-1, %%eax\n\t"                                             \
    "jne 2f\n\t"
#define ALL15(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)

static long keep_ymm(const uint8_t (*p)[64])
{
    long left; /* each ymm register holds the first 32 bytes of its 64-byte row */
    __asm__ volatile(ALL15(LOAD_Y)
                     "mov %[n], %%r12\n"
                     "1:\n\t"
                     "mov $24, %%eax\n\t" /* sched_yield */
                     "syscall\n\t"
                     ALL15(CHECK_Y)
                     "dec %%r12\n\t"
                     "jnz 1b\n"
                     "2:\n\t"
                     "mov %%r12, %[left]\n\t"
                     "vzeroupper\n"
                     : [left] "=&r"(left)
                     : [p] "r"(p), [n] "i"(SWITCHES)
                     : "rax", "rcx", "r11", "r12", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
                       "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
                       "xmm15");
    return left;
}

#define LOAD_Z(i) "vmovdqu64 " #i "*64(%[p]), %%zmm" #i "\n\t"
#define CHECK_Z(i)                                                   \
    "vpcmpeqd " #i "*64(%[p]), %%zmm" #i ", %%k1\n\t"                \
    "kmovw %%k1, %%eax\n\t"                                          \
    "cmp $0xffff, %%eax\n\t"                                         \
    "jne 2f\n\t"
#define ALL32(X) ALL15(X) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) \
    X(26) X(27) X(28) X(29) X(30) X(31)

__attribute__((target("avx512f"))) static long keep_zmm(const uint8_t (*p)[64])
{
    long left;
    __asm__ volatile(ALL32(LOAD_Z)
                     "mov %[n], %%r12\n"
                     "1:\n\t"
                     "mov $24, %%eax\n\t" /* sched_yield */
                     "syscall\n\t"
                     ALL32(CHECK_Z)
                     "dec %%r12\n\t"
                     "jnz 1b\n"
                     "2:\n\t"
                     "mov %%r12, %[left]\n\t"
                     "vzeroupper\n"
                     : [left] "=&r"(left)
                     : [p] "r"(p), [n] "i"(SWITCHES)
                     : "rax", "rcx", "r11", "r12", "memory", "cc", "k1", "xmm0", "xmm1", "xmm2", "xmm3",
                       "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                       "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                       "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
    return left;
}

static void *run(void *arg)
{
    struct job *j = arg;
    for (int r = 0; r < 32; r++)
        for (int b = 0; b < 64; b++)
            j->pattern[r][b] = (uint8_t)(j->id * 97 + r * 13 + b * 7 + 1);
    j->left = j->avx512 ? keep_zmm(j->pattern) : keep_ymm(j->pattern);
    return NULL;
}

int main(int argc, char **argv)
{
    int avx512 = argc > 1 && strcmp(argv[1], "avx512") == 0;
    const char *regs = avx512 ? "zmm0-zmm31" : "ymm0-ymm14";
    static struct job jobs[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        jobs[i].id = i + 1;
        jobs[i].avx512 = avx512;
        pthread_create(&t[i], NULL, run, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        if (jobs[i].left) {
            printf("thread %d: %s changed after %ld switches\n", jobs[i].id, regs, SWITCHES - jobs[i].left + 1);
            bad = 1;
        } else {
            printf("thread %d: %s kept over %d switches\n", jobs[i].id, regs, SWITCHES);
        }
    }
    return bad;
}
