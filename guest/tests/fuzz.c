/* fuzz [SEED [ROUNDS]]: calls every system call number from 0 to 335,
 * ROUNDS times each (default 24),
 * with garbage arguments: NULL, unaligned, kernel-half and non-canonical
 * pointers, a buffer whose end runs into a guard page, huge and negative
 * lengths, random words. Whatever comes back, it goes on; it exits 0 when it
 * gets through them all. The point is that the monitor survives whatever a
 * program passes it.
 *
 * Left out (skip() below): calls that would legitimately end the run, block
 * it forever, or destroy this program's own memory, descriptors or TLS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LAST 335
static int rounds = 24;
#define BUF 65536

static unsigned char *buf; /* BUF bytes of 'A', then a PROT_NONE guard page */
static uint64_t rng = 0x9e3779b97f4a7c15;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t garbage(void)
{
    switch (next() % 14) {
    case 0: return 0;                        /* NULL, fd 0, length 0 */
    case 1: return 1;
    case 2: return 2;
    case 3: return (uint64_t)-1;
    case 4: return 0x7fffffff;
    case 5: return 0xffffffffffff0000;       /* kernel half */
    case 6: return 0x8000000000000000;       /* not canonical */
    case 7: return 0xdead0001;               /* unmapped, unaligned */
    case 8: return (uintptr_t)buf;           /* valid, 'A's */
    case 9: return (uintptr_t)buf + BUF - 8; /* runs into the guard page */
    case 10: return (uintptr_t)buf + BUF;    /* the guard page */
    case 11: return 4096;
    case 12: return 0x1000 | (next() & 0xfff); /* never a descriptor this program made */
    default: return next();
    }
}

static int user_page(uint64_t a) { return a % 4096 == 0 && a < 0x800000000000; }

static int skip(long nr, const uint64_t *a)
{
    switch (nr) {
    case SYS_exit: case SYS_exit_group:              /* end the run */
    case SYS_kill: case SYS_tkill: case SYS_tgkill:
    case SYS_rt_sigqueueinfo: case SYS_rt_tgsigqueueinfo:
    case SYS_alarm: case SYS_setitimer:              /* signals later */
    case SYS_timer_create: case SYS_timer_settime:
    case SYS_seccomp:                                /* strict mode kills the next call */
    case SYS_rt_sigreturn:                           /* returns to a garbage frame */
    case 335:                                        /* uretprobe (Linux 6.11): SIGILL outside a uprobe */
    case SYS_fork: case SYS_vfork: case SYS_clone:  /* each child would fuzz too */
    case SYS_pause: case SYS_rt_sigsuspend:          /* block forever */
    case SYS_rt_sigtimedwait:
    case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
    case SYS_shmget: case SYS_shmat: case SYS_shmctl: case SYS_shmdt: /* SysV IPC: msgrcv, semop block */
    case SYS_semget: case SYS_semop: case SYS_semctl: case SYS_semtimedop:
    case SYS_msgget: case SYS_msgsnd: case SYS_msgrcv: case SYS_msgctl:
        return 1;
    case SYS_close: case SYS_shutdown:               /* keep stdin, stdout, stderr */
        return a[0] < 3;
    case SYS_arch_prctl:                             /* ARCH_SET_FS would break TLS */
        return a[0] == 0x1002;
    case SYS_brk:              /* growing the heap could make a garbage pointer valid */
        return a[0] != 0 && a[0] < 0x800000000000;
    case SYS_mmap: case SYS_mprotect: case SYS_munmap: /* would replace, unmap or protect */
    case SYS_madvise: case SYS_pkey_mprotect: case SYS_remap_file_pages: /* this program */
        return user_page(a[0]);
    case SYS_mremap:
        return user_page(a[0]) || user_page(a[4]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rng ^= strtoull(argv[1], 0, 0) * 0x2545f4914f6cdd1d;
    if (rng == 0) /* xorshift's one fixed point */
        rng = 1;
    if (argc > 2)
        rounds = atoi(argv[2]);
    buf = mmap(NULL, BUF + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || mprotect(buf + BUF, 4096, PROT_NONE) != 0)
        return 1;
    printf("fuzz: system calls 0..%d, %d rounds each\n", LAST, rounds);
    fflush(stdout);
    long calls = 0;
    for (long nr = 0; nr <= LAST; nr++) {
        for (int round = 0; round < rounds; round++) {
            uint64_t a[6];
            for (int i = 0; i < 6; i++)
                a[i] = garbage();
            if (nr == SYS_mmap) /* a hint that no garbage pointer can come to point into */
                a[0] = round & 1 ? 0x8000000000000000 : 0xffffffffffff0000;
            if (skip(nr, a))
                continue;
            memset(buf, 'A', BUF);
            syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
            calls++;
        }
    }
    /* The process calls again with a child to name: garbage waits (which
     * reap it), groups, sessions and limits, the pid half the time the
     * child's. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    static const long procs[] = {SYS_wait4, SYS_waitid, SYS_setpgid, SYS_getpgid, SYS_getsid,
                                 SYS_prlimit64, SYS_getppid, SYS_setsid};
    for (int round = 0; round < rounds; round++) {
        for (unsigned i = 0; i < sizeof procs / sizeof procs[0]; i++) {
            uint64_t a[6];
            for (int j = 0; j < 6; j++)
                a[j] = garbage();
            if (round & 1)
                a[procs[i] == SYS_waitid ? 1 : 0] = child;
            memset(buf, 'A', BUF);
            syscall(procs[i], a[0], a[1], a[2], a[3], a[4], a[5]);
            calls++;
        }
    }
    while (waitpid(-1, NULL, 0) > 0)
        ;
    char line[64];
    int n = snprintf(line, sizeof line, "fuzz: %ld calls made\n", calls);
    write(1, line, n); /* fd 1 may have been replaced by now: no check */
    return 0;
}
