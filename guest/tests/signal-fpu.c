// The FPU and vector state survives a signal handler that clobbers it:
// main keeps patterns in ymm0-15 (and zmm0-31 and k1-7 where the CPU has
// AVX-512), a non-default MXCSR and x87 control word across a tgkill to
// itself; the handler, which starts with the reset state (MXCSR 0x1f80,
// registers zero) as on Linux, overwrites all of them.
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

static volatile uint32_t handler_mxcsr;
static volatile uint64_t handler_ymm15[4];
static volatile int handled;
static int avx512;

__attribute__((target("avx2"))) static void clobber_avx(void) {
    uint32_t mx = 0x1f80 | (3 << 13); // round toward zero
    uint16_t cw = 0x27f;              // x87 single precision... different from main's
    __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
                     "vmovdqa %%ymm0, %%ymm1\n\t vmovdqa %%ymm0, %%ymm2\n\t vmovdqa %%ymm0, %%ymm3\n\t"
                     "vmovdqa %%ymm0, %%ymm4\n\t vmovdqa %%ymm0, %%ymm5\n\t vmovdqa %%ymm0, %%ymm6\n\t"
                     "vmovdqa %%ymm0, %%ymm7\n\t vmovdqa %%ymm0, %%ymm8\n\t vmovdqa %%ymm0, %%ymm9\n\t"
                     "vmovdqa %%ymm0, %%ymm10\n\t vmovdqa %%ymm0, %%ymm11\n\t vmovdqa %%ymm0, %%ymm12\n\t"
                     "vmovdqa %%ymm0, %%ymm13\n\t vmovdqa %%ymm0, %%ymm14\n\t vmovdqa %%ymm0, %%ymm15\n\t"
                     "ldmxcsr %0\n\t fldcw %1"
                     :
                     : "m"(mx), "m"(cw)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

__attribute__((target("avx512f"))) static void clobber_avx512(void) {
    __asm__ volatile("vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"
                     "vmovdqa64 %%zmm16, %%zmm17\n\t vmovdqa64 %%zmm16, %%zmm31\n\t"
                     "vmovdqa64 %%zmm16, %%zmm0\n\t vmovdqa64 %%zmm16, %%zmm15\n\t"
                     "kxnorw %%k0, %%k0, %%k1\n\t kxnorw %%k0, %%k0, %%k7"
                     :
                     :
                     : "xmm0", "xmm15", "xmm16", "xmm17", "xmm31", "k1", "k7");
}

__attribute__((target("avx2"))) static void handler(int sig) {
    // First thing: what state did the handler start with?
    uint64_t y[4];
    uint32_t mx;
    __asm__ volatile("vmovdqu %%ymm15, %0\n\t stmxcsr %1" : "=m"(y), "=m"(mx));
    memcpy((void *)handler_ymm15, y, sizeof y);
    handler_mxcsr = mx;
    clobber_avx();
    if (avx512)
        clobber_avx512();
    handled++;
}


__attribute__((target("avx2"))) static int check_avx(void) {
    uint64_t in[16][4], out[16][4];
    for (int r = 0; r < 16; r++)
        for (int l = 0; l < 4; l++)
            in[r][l] = 0x0101010101010101ull * (r + 1) + l;
    uint32_t mx = 0x1f80 | (1 << 13), mx_out = 0, mx_default = 0x1f80; // round down
    uint16_t cw = (0x37f & ~(3 << 10)) | (1 << 10), cw_out = 0, cw_default = 0x37f;
    long pid = getpid(), tid = gettid();
    __asm__ volatile(
        "vmovdqu 0(%[in]), %%ymm0\n\t vmovdqu 32(%[in]), %%ymm1\n\t vmovdqu 64(%[in]), %%ymm2\n\t"
        "vmovdqu 96(%[in]), %%ymm3\n\t vmovdqu 128(%[in]), %%ymm4\n\t vmovdqu 160(%[in]), %%ymm5\n\t"
        "vmovdqu 192(%[in]), %%ymm6\n\t vmovdqu 224(%[in]), %%ymm7\n\t vmovdqu 256(%[in]), %%ymm8\n\t"
        "vmovdqu 288(%[in]), %%ymm9\n\t vmovdqu 320(%[in]), %%ymm10\n\t vmovdqu 352(%[in]), %%ymm11\n\t"
        "vmovdqu 384(%[in]), %%ymm12\n\t vmovdqu 416(%[in]), %%ymm13\n\t vmovdqu 448(%[in]), %%ymm14\n\t"
        "vmovdqu 480(%[in]), %%ymm15\n\t"
        "ldmxcsr %[mx]\n\t fldcw %[cw]\n\t"
        "mov $234, %%eax\n\t mov %[pid], %%rdi\n\t mov %[tid], %%rsi\n\t mov $10, %%edx\n\t syscall\n\t"
        "vmovdqu %%ymm0, 0(%[out])\n\t vmovdqu %%ymm1, 32(%[out])\n\t vmovdqu %%ymm2, 64(%[out])\n\t"
        "vmovdqu %%ymm3, 96(%[out])\n\t vmovdqu %%ymm4, 128(%[out])\n\t vmovdqu %%ymm5, 160(%[out])\n\t"
        "vmovdqu %%ymm6, 192(%[out])\n\t vmovdqu %%ymm7, 224(%[out])\n\t vmovdqu %%ymm8, 256(%[out])\n\t"
        "vmovdqu %%ymm9, 288(%[out])\n\t vmovdqu %%ymm10, 320(%[out])\n\t vmovdqu %%ymm11, 352(%[out])\n\t"
        "vmovdqu %%ymm12, 384(%[out])\n\t vmovdqu %%ymm13, 416(%[out])\n\t vmovdqu %%ymm14, 448(%[out])\n\t"
        "vmovdqu %%ymm15, 480(%[out])\n\t"
        "stmxcsr %[mx_out]\n\t fnstcw %[cw_out]\n\t ldmxcsr %[mx_default]\n\t fldcw %[cw_default]\n\t"
        "vzeroupper"
        : [mx_out] "=m"(mx_out), [cw_out] "=m"(cw_out)
        : [in] "r"(in), [out] "r"(out), [mx] "m"(mx), [cw] "m"(cw), [pid] "r"(pid), [tid] "r"(tid),
          [mx_default] "m"(mx_default), [cw_default] "m"(cw_default)
        : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm0", "xmm1", "xmm2", "xmm3",
          "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
          "xmm14", "xmm15");
    int bad = 0;
    for (int r = 0; r < 16; r++)
        for (int l = 0; l < 4; l++)
            if (out[r][l] != in[r][l])
                bad++;
    CHECK(handled == 1, "the handler ran while main held its registers");
    CHECK(bad == 0, "ymm0-15 survived the handler (%d lanes differ)", bad);
    CHECK(mx_out == mx, "MXCSR survived (%#x)", mx_out);
    CHECK(cw_out == cw, "the x87 control word survived (%#x)", cw_out);
    return bad;
}

__attribute__((target("avx512f"))) static void check_avx512(void) {
    uint64_t in[4][8], out[4][8];
    for (int r = 0; r < 4; r++)
        for (int l = 0; l < 8; l++)
            in[r][l] = 0x1111111111111111ull * (r + 1) ^ l;
    uint16_t k1 = 0x1234, k7 = 0x8421, k1_out, k7_out;
    long pid = getpid(), tid = gettid();
    __asm__ volatile(
        "vmovdqu64 0(%[in]), %%zmm0\n\t vmovdqu64 64(%[in]), %%zmm15\n\t"
        "vmovdqu64 128(%[in]), %%zmm16\n\t vmovdqu64 192(%[in]), %%zmm31\n\t"
        "kmovw %[k1], %%k1\n\t kmovw %[k7], %%k7\n\t"
        "mov $234, %%eax\n\t mov %[pid], %%rdi\n\t mov %[tid], %%rsi\n\t mov $10, %%edx\n\t syscall\n\t"
        "vmovdqu64 %%zmm0, 0(%[out])\n\t vmovdqu64 %%zmm15, 64(%[out])\n\t"
        "vmovdqu64 %%zmm16, 128(%[out])\n\t vmovdqu64 %%zmm31, 192(%[out])\n\t"
        "kmovw %%k1, %[k1_out]\n\t kmovw %%k7, %[k7_out]\n\t vzeroupper"
        : [k1_out] "=m"(k1_out), [k7_out] "=m"(k7_out)
        : [in] "r"(in), [out] "r"(out), [k1] "m"(k1), [k7] "m"(k7), [pid] "r"(pid), [tid] "r"(tid)
        : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm0", "xmm15", "xmm16", "xmm31",
          "k1", "k7");
    int bad = 0;
    for (int r = 0; r < 4; r++)
        for (int l = 0; l < 8; l++)
            if (out[r][l] != in[r][l])
                bad++;
    CHECK(bad == 0, "zmm0, zmm15, zmm16, zmm31 survived the handler (%d lanes differ)", bad);
    CHECK(k1_out == k1 && k7_out == k7, "opmask k1 and k7 survived (%#x %#x)", k1_out, k7_out);
}

// Writes xmm3 and MXCSR in the frame's fpstate: sigreturn restores them.
static void edit_frame(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    uc->uc_mcontext.fpregs->_xmm[3].element[0] = 0xfeedface;
    uc->uc_mcontext.fpregs->mxcsr = 0x1f80 | (2 << 13);
}

static void check_edit(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = edit_frame;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR2, &sa, NULL);
    long pid = getpid(), tid = gettid();
    uint32_t lane = 0, mx = 0, mx_default = 0x1f80;
    __asm__ volatile("pxor %%xmm3, %%xmm3\n\t"
                     "mov $234, %%eax\n\t mov %[pid], %%rdi\n\t mov %[tid], %%rsi\n\t"
                     "mov $12, %%edx\n\t syscall\n\t"
                     "movd %%xmm3, %[lane]\n\t stmxcsr %[mx]\n\t ldmxcsr %[mx_default]"
                     : [lane] "=r"(lane), [mx] "=m"(mx)
                     : [pid] "r"(pid), [tid] "r"(tid), [mx_default] "m"(mx_default)
                     : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm3");
    CHECK(lane == 0xfeedface && mx == (0x1f80 | (2 << 13)),
          "the handler's edits of xmm3 and MXCSR in the frame took effect (%#x, %#x)", lane, mx);
}

int main(void) {
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f");
    if (!__builtin_cpu_supports("avx2")) {
        printf("no AVX2: nothing to check\n");
        return 0;
    }
    signal(SIGUSR1, handler);
    check_avx();
    CHECK(handler_mxcsr == 0x1f80, "the handler started with MXCSR reset (%#x)", handler_mxcsr);
    CHECK(handler_ymm15[0] == 0 && handler_ymm15[3] == 0, "and with ymm15 zero");
    if (avx512) {
        check_avx512();
        CHECK(handled == 2, "the AVX-512 handler ran");
    } else {
        printf("no AVX-512 here\n");
    }
    check_edit();
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
