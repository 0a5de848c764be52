/* hostile: asks the monitor for unbounded work, one way per mode (argv[1]).
 * Each mode prints what the calls returned and exits 0 (deep-signals ends
 * killed by SIGSEGV, as on Linux, when the stack is gone). The test around
 * it (tests/tests/hostile.rs) measures the monitor's memory and time.
 *
 *   io          huge write/read/writev/pwrite/getrandom lengths from unmapped
 *               and PROT_NONE memory, and a buffer that runs into a hole
 *   reserve     a 64 TiB PROT_NONE reservation: pages touched far apart,
 *               mprotect, madvise, munmap of it all, exit with the rest mapped
 *   mremap      a page grown to absurd sizes with mremap, moved and touched
 *   threads     N threads (argv[2], default 3000) alive at once, then joined
 *   deep-signals a handler that raises its own signal (SA_NODEFER) until the
 *               stack is exhausted
 *   fork-bomb   fork until fork fails (EAGAIN at the process cap), then
 *               kill them all (kill -1) and reap them
 *   descriptors pipes until EMFILE, huge lengths into pipes and sockets,
 *               absurd pipe sizes, socket buffers, poll/select/epoll counts,
 *               descriptors in flight until the buffers are full, control
 *               buffers of absurd lengths */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIB (1ULL << 40)
#define GIB (1ULL << 30)
#define HUGE_LEN ((size_t)1 << 46)

static void show(const char *what, long r)
{
    if (r < 0)
        printf("%s = -1 (%s)\n", what, strerrorname_np(errno));
    else
        printf("%s = %ld\n", what, r);
    fflush(stdout);
}

static long sys(long nr, long a, long b, long c)
{
    return syscall(nr, a, b, c);
}

static void io(void)
{
    char *none = mmap(NULL, GIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    char *hole = (char *)0x100000000000ULL; /* nothing is mapped there */
    int fd = open("/tmp/hostile", O_RDWR | O_CREAT | O_TRUNC, 0600);
    int zero = open("/dev/zero", O_RDONLY);
    int urandom = open("/dev/urandom", O_RDONLY);
    char *srcs[2] = {hole, none};
    const char *names[2] = {"unmapped", "PROT_NONE"};
    for (int i = 0; i < 2; i++) {
        char what[64];
        char *p = srcs[i];
        snprintf(what, sizeof what, "write(stdout, %s, 2^46)", names[i]);
        show(what, sys(SYS_write, 1, (long)p, HUGE_LEN));
        snprintf(what, sizeof what, "write(file, %s, 2^31-1)", names[i]);
        show(what, sys(SYS_write, fd, (long)p, 0x7fffffff));
        snprintf(what, sizeof what, "pwrite(file, %s, 2^31-1, 2^30)", names[i]);
        show(what, syscall(SYS_pwrite64, fd, p, 0x7fffffffL, 1L << 30));
        snprintf(what, sizeof what, "read(zero, %s, 2^46)", names[i]);
        show(what, sys(SYS_read, zero, (long)p, HUGE_LEN));
        snprintf(what, sizeof what, "read(urandom, %s, 2^46)", names[i]);
        show(what, sys(SYS_read, urandom, (long)p, HUGE_LEN));
        snprintf(what, sizeof what, "getrandom(%s, 2^46)", names[i]);
        show(what, sys(SYS_getrandom, (long)p, HUGE_LEN, 0));
        struct iovec iov[1024];
        for (int j = 0; j < 1024; j++) {
            iov[j].iov_base = p;
            iov[j].iov_len = HUGE_LEN;
        }
        snprintf(what, sizeof what, "writev(stdout, 1024 x %s 2^46)", names[i]);
        show(what, sys(SYS_writev, 1, (long)iov, 1024));
        snprintf(what, sizeof what, "writev(file, 1024 x %s 2^46)", names[i]);
        show(what, sys(SYS_writev, fd, (long)iov, 1024));
        snprintf(what, sizeof what, "readv(zero, 1024 x %s 2^46)", names[i]);
        show(what, sys(SYS_readv, zero, (long)iov, 1024));
    }
    /* Two valid pages, then the PROT_NONE gigabyte: a short write, as on Linux. */
    char *two = mmap(NULL, 2 * 4096 + GIB, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    mprotect(two + 2 * 4096, GIB, PROT_NONE);
    memset(two, 'x', 2 * 4096);
    show("write(file, 2 pages then PROT_NONE, 2^31-1)", sys(SYS_write, fd, (long)two, 0x7fffffff));
    show("read(zero, 2 pages then PROT_NONE, 2^46)", sys(SYS_read, zero, (long)two, HUGE_LEN));
    show("getrandom(2 pages then PROT_NONE, 2^46)", sys(SYS_getrandom, (long)two, HUGE_LEN, 0));
    show("lseek(file, 0, SEEK_END)", lseek(fd, 0, SEEK_END));
}

static void reserve(void)
{
    size_t len = 64 * TIB;
    char *r = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    show("mmap(64 TiB, PROT_NONE)", r == MAP_FAILED ? -1 : 0);
    if (r == MAP_FAILED)
        return;
    show("mprotect(64 TiB, RW)", mprotect(r, len, PROT_READ | PROT_WRITE));
    /* 512 pages 128 GiB apart: each needs its own page tables. */
    for (size_t off = 0; off < len; off += len / 512)
        r[off] = 1;
    show("mprotect(64 TiB, R)", mprotect(r, len, PROT_READ));
    show("mprotect(64 TiB, NONE)", mprotect(r, len, PROT_NONE));
    show("mprotect(64 TiB, RW)", mprotect(r, len, PROT_READ | PROT_WRITE));
    show("madvise(64 TiB, DONTNEED)", madvise(r, len, MADV_DONTNEED));
    for (size_t off = 0; off < len; off += len / 512)
        r[off] = 2;
    show("munmap(first 32 TiB)", munmap(r, len / 2));
    char *r2 = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    show("mmap(another 64 TiB, PROT_NONE)", r2 == MAP_FAILED ? -1 : 0);
    /* exit with 32 + 64 TiB still mapped */
}

static void do_mremap(void)
{
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p[0] = 'a';
    size_t sizes[] = {GIB, 64 * TIB, 100 * TIB, 127 * TIB, 1ULL << 47, 1ULL << 60, (size_t)-4096};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char what[64];
        void *q = mremap(p, 4096, sizes[i], MREMAP_MAYMOVE);
        snprintf(what, sizeof what, "mremap(page, %#zx)", sizes[i]);
        show(what, q == MAP_FAILED ? -1 : 0);
        if (q != MAP_FAILED) {
            p = q;
            if (p[0] != 'a') {
                printf("contents lost\n");
                exit(1);
            }
            p[sizes[i] - 1] = 'z';
            q = mremap(p, sizes[i], 4096, 0);
            show("mremap(back to a page)", q == MAP_FAILED ? -1 : 0);
        }
    }
    /* A 32 TiB mapping, a few pages touched, then moved whole. */
    char *big = mremap(p, 4096, 32 * TIB, MREMAP_MAYMOVE);
    show("mremap(page, 32 TiB)", big == MAP_FAILED ? -1 : 0);
    if (big == MAP_FAILED)
        return;
    for (size_t off = 0; off < 32 * TIB; off += TIB)
        big[off] = 'b';
    char *fixed = (char *)0x10000000000ULL;
    char *moved = mremap(big, 32 * TIB, 32 * TIB + 4096, MREMAP_MAYMOVE | MREMAP_FIXED, fixed);
    show("mremap(32 TiB, moved to 1 TiB)", moved == MAP_FAILED ? -1 : 0);
    if (moved != MAP_FAILED && (moved[0] != 'b' || moved[TIB] != 'b'))
        printf("contents lost\n");
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static int started, released;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    started++;
    while (!released)
        pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void threads(int n)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t *t = calloc(n, sizeof *t);
    int made = 0;
    for (; made < n; made++) {
        int e = pthread_create(&t[made], &attr, waiter, NULL);
        if (e) {
            printf("pthread_create %d: %s\n", made, strerrorname_np(e));
            break;
        }
    }
    pthread_mutex_lock(&lock);
    printf("%d threads made, %d started before the release\n", made, started);
    released = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    printf("%d threads joined\n", made);
}

static volatile long depth;

static void nest(int sig)
{
    depth++;
    if (depth % 1000 == 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "depth %ld\n", depth);
        write(1, line, n);
    }
    raise(sig);
}

static void deep_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nest;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
}

/* Forks until fork fails: the monitor's process cap must answer EAGAIN
 * long before guest or host memory runs out. Then every child is killed
 * and reaped. */
static void fork_bomb(void)
{
    int n = 0;
    for (;;) {
        pid_t c = fork();
        if (c == 0) {
            pause();
            _exit(0);
        }
        if (c < 0)
            break;
        n++;
    }
    printf("fork: %s after %d children\n", errno == EAGAIN ? "EAGAIN" : strerror(errno), n);
    kill(-1, SIGKILL);
    int reaped = 0;
    while (wait(NULL) > 0)
        reaped++;
    printf("reaped %d\n", reaped);
}

/* sendmsg with `n` SCM_RIGHTS copies of `fd` and one byte, non-blocking. */
static long send_rights(int s, int fd, int n)
{
    static char ctl[CMSG_SPACE(sizeof(int) * 253)];
    struct cmsghdr *c = (struct cmsghdr *)ctl;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    for (int i = 0; i < n; i++)
        ((int *)CMSG_DATA(c))[i] = fd;
    struct iovec iov = {"x", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    return sendmsg(s, &m, MSG_DONTWAIT);
}

/* Descriptors in flight until the receivers' buffers are full, control
 * buffers of absurd lengths and in memory that cannot be read or written. */
static void rights_in_flight(char *hole, char *none)
{
    int kinds[2] = {SOCK_STREAM, SOCK_DGRAM};
    const char *names[2] = {"stream", "datagram"};
    for (int k = 0; k < 2; k++) {
        int sv[2];
        socketpair(AF_UNIX, kinds[k], 0, sv);
        int sent = 0;
        while (send_rights(sv[0], sv[0], 253) == 1)
            sent++;
        printf("%s: %d messages of 253 descriptors in flight, then %s\n", names[k], sent, strerrorname_np(errno));
        close(sv[0]);
        close(sv[1]);
    }
    int sv[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    struct iovec iov = {"x", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = hole, .msg_controllen = HUGE_LEN};
    show("sendmsg(control unmapped, 2^46)", sendmsg(sv[0], &m, 0));
    m.msg_control = none;
    m.msg_controllen = 65536;
    show("sendmsg(control PROT_NONE, 65536)", sendmsg(sv[0], &m, 0));
    send_rights(sv[0], 0, 3);
    char buf[4];
    struct iovec in = {buf, sizeof buf};
    struct msghdr r = {.msg_iov = &in, .msg_iovlen = 1, .msg_control = none, .msg_controllen = 4096};
    show("recvmsg(control PROT_NONE, 4096)", recvmsg(sv[1], &r, 0));
    printf("msg_flags %#x, msg_controllen %zu\n", r.msg_flags, r.msg_controllen);
    send_rights(sv[0], 0, 3);
    r.msg_control = hole;
    r.msg_controllen = HUGE_LEN;
    show("recvmsg(control unmapped, 2^46)", recvmsg(sv[1], &r, 0));
    printf("lowest free descriptor: %d\n", dup(0));
}

static void descriptors(void)
{
    int made = 0, fds[2];
    while (pipe(fds) == 0)
        made++;
    printf("%d pipes, then %s\n", made, strerrorname_np(errno));
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    char *hole = (char *)0x100000000000ULL;
    char *none = mmap(NULL, GIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    char *big = mmap(NULL, GIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    pipe2(fds, O_NONBLOCK);
    show("write(pipe, unmapped, 2^46)", sys(SYS_write, fds[1], (long)hole, HUGE_LEN));
    show("write(pipe, PROT_NONE, 2^46)", sys(SYS_write, fds[1], (long)none, HUGE_LEN));
    show("write(pipe, 1 GiB, 2^30)", sys(SYS_write, fds[1], (long)big, GIB));
    show("read(pipe, unmapped, 2^46)", sys(SYS_read, fds[0], (long)hole, HUGE_LEN));
    show("read(pipe, 1 GiB, 2^30)", sys(SYS_read, fds[0], (long)big, GIB));
    show("fcntl(pipe, F_SETPIPE_SZ, 2^40)", fcntl(fds[1], F_SETPIPE_SZ, (int)(TIB >> 20)));
    show("fcntl(pipe, F_SETPIPE_SZ, INT_MAX)", fcntl(fds[1], F_SETPIPE_SZ, 0x7fffffff));
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    int huge = 0x7fffffff;
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &huge, sizeof huge);
    int got = 0;
    socklen_t len = sizeof got;
    getsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &got, &len);
    printf("SO_RCVBUF INT_MAX gives %d\n", got);
    show("send(socket, 1 GiB, 2^30)", send(sv[0], big, GIB, 0));
    show("send(socket, unmapped, 2^46)", send(sv[0], hole, HUGE_LEN, 0));
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(7)};
    lo.sin_addr.s_addr = htonl(0x7f000001);
    show("sendto(udp, 1 GiB, 2^30)", sendto(u, big, GIB, 0, (struct sockaddr *)&lo, sizeof lo));
    struct pollfd pfd = {fds[0], POLLIN, 0};
    show("poll(1, 2^40 descriptors)", syscall(SYS_poll, &pfd, 1L << 40, 0));
    show("select(2^31-1 descriptors)", syscall(SYS_select, 0x7fffffffL, hole, 0L, 0L, 0L));
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev);
    show("epoll_wait(INT_MAX events)", epoll_wait(ep, (struct epoll_event *)big, 0x7fffffff, 0));
    show("epoll_wait(unmapped, 1000 events)", epoll_wait(ep, (struct epoll_event *)hole, 1000, 0));
    show("epoll_wait(1 GiB, 2^26 events)", epoll_wait(ep, (struct epoll_event *)big, 1 << 26, 0));
    rights_in_flight(hole, none);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "io"))
        io();
    else if (!strcmp(mode, "reserve"))
        reserve();
    else if (!strcmp(mode, "mremap"))
        do_mremap();
    else if (!strcmp(mode, "threads"))
        threads(argc > 2 ? atoi(argv[2]) : 3000);
    else if (!strcmp(mode, "deep-signals"))
        deep_signals();
    else if (!strcmp(mode, "fork-bomb"))
        fork_bomb();
    else if (!strcmp(mode, "descriptors"))
        descriptors();
    else {
        fprintf(stderr,
                "usage: hostile io|reserve|mremap|threads [N]|deep-signals|fork-bomb|descriptors\n");
        return 2;
    }
    printf("done\n");
    return 0;
}
