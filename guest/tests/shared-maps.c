/* shared-maps: MAP_SHARED memory really shared between processes, as on
 * Linux. Anonymous shared memory across fork (a counter under a
 * process-shared mutex, a process-shared semaphore, /dev/zero, madvise
 * MADV_DONTNEED keeping the data, mremap moving it, munmap in the child
 * leaving the parent's), MAP_PRIVATE staying private; a file mapped
 * MAP_SHARED by two processes that see each other's stores, read() seeing a
 * store and a store seeing write(), msync, and the stores on the file after
 * munmap and close, and after a child that exits with its mapping. Prints
 * `ok: ...` lines, then `all passed`: the same natively and inside Rewind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define ROUNDS 2000
#define PAGE 4096

struct counter {
    pthread_mutex_t lock;
    sem_t ready;
    long n;
};

static void count(struct counter *c)
{
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&c->lock);
        c->n++;
        pthread_mutex_unlock(&c->lock);
    }
}

static int wait_child(pid_t pid)
{
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void anonymous(void)
{
    struct counter *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(c != MAP_FAILED, "mmap MAP_SHARED|MAP_ANONYMOUS");
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&c->lock, &a);
    CHECK(sem_init(&c->ready, 1, 0) == 0, "sem_init with pshared 1");
    int *priv = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *priv = 1;
    pid_t pid = fork();
    if (pid == 0) {
        *priv = 2;
        sem_post(&c->ready);
        count(c);
        _exit(0);
    }
    CHECK(sem_wait(&c->ready) == 0, "the child's sem_post wakes the parent's sem_wait");
    count(c);
    CHECK(wait_child(pid) == 0, "the child exited 0");
    CHECK(c->n == 2 * ROUNDS, "parent and child counted under a process-shared mutex: %ld",
          c->n);
    CHECK(*priv == 1, "a MAP_PRIVATE page stays the parent's after the child's store: %d",
          *priv);

    /* munmap in a child leaves the parent's mapping; the page lives on. */
    pid = fork();
    if (pid == 0) {
        c->n = 7;
        munmap(c, sizeof *c);
        _exit(0);
    }
    wait_child(pid);
    CHECK(c->n == 7, "the child's store stays after its munmap: %ld", c->n);

    /* MADV_DONTNEED on shared memory keeps the data (shmem). */
    CHECK(madvise(c, PAGE, MADV_DONTNEED) == 0 && c->n == 7,
          "MADV_DONTNEED keeps shared data: %ld", c->n);

    /* mremap moves the mapping; the child forked before still shares it. */
    char *big = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    strcpy(big, "before");
    /* Its second page taken by another mapping: growing must move. */
    char *hold = mmap(big + PAGE, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    int go[2];
    pipe(go);
    pid = fork();
    if (pid == 0) {
        char x;
        read(go[0], &x, 1);
        strcpy(big, "after");
        _exit(0);
    }
    char *moved = mremap(big, PAGE, 2 * PAGE, MREMAP_MAYMOVE);
    CHECK(hold != MAP_FAILED && moved != MAP_FAILED && moved != big && !strcmp(moved, "before"),
          "mremap moves shared memory with its data");
    write(go[1], "x", 1);
    wait_child(pid);
    CHECK(!strcmp(moved, "after"),
          "a store through the child's mapping is seen at the new place: %s", moved);
    moved[PAGE] = 1;
    CHECK(moved[PAGE] == 1, "the grown page is there");

    /* /dev/zero mapped shared is shared anonymous memory. */
    int z = open("/dev/zero", O_RDWR);
    int *zp = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, z, 0);
    close(z);
    pid = fork();
    if (pid == 0) {
        *zp = 42;
        _exit(0);
    }
    wait_child(pid);
    CHECK(zp != MAP_FAILED && *zp == 42, "MAP_SHARED of /dev/zero is shared with a child");
}

static int file_says(const char *path, off_t at, const char *want)
{
    char buf[64] = {0};
    int fd = open(path, O_RDONLY);
    int n = pread(fd, buf, strlen(want), at);
    close(fd);
    return n == (int)strlen(want) && !memcmp(buf, want, n);
}

static void file(void)
{
    char path[] = "/tmp/shared-mapsXXXXXX";
    int fd = mkstemp(path);
    CHECK(ftruncate(fd, 2 * PAGE) == 0, "a two-page file");
    char *m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED, "mmap MAP_SHARED of the file");
    int to_child[2], to_parent[2];
    pipe(to_child);
    pipe(to_parent);
    char x;
    pid_t pid = fork();
    if (pid == 0) {
        /* Its own mapping of the file, not the inherited one. */
        int f2 = open(path, O_RDWR);
        char *own = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, f2, 0);
        strcpy(own, "from the child");
        write(to_parent[1], "x", 1);
        read(to_child[0], &x, 1);
        int ok = !strcmp(own + PAGE, "from the parent");
        strcpy(own + 100, "child again");
        /* Exits with the mapping in place. */
        _exit(ok ? 0 : 1);
    }
    read(to_parent[0], &x, 1);
    CHECK(!strcmp(m, "from the child"), "the parent sees the child's store in its own mapping");
    strcpy(m + PAGE, "from the parent");
    write(to_child[1], "x", 1);
    CHECK(wait_child(pid) == 0, "the child saw the parent's store");
    CHECK(!strcmp(m + 100, "child again"), "the store of a child that exited mapped is kept");

    char buf[32] = {0};
    CHECK(pread(fd, buf, 14, 0) == 14 && !strcmp(buf, "from the child"),
          "read() sees a store: %s", buf);
    CHECK(pwrite(fd, "written", 7, 200) == 7 && !memcmp(m + 200, "written", 7),
          "a write() is seen through the mapping");
    strcpy(m + PAGE + 50, "synced");
    CHECK(msync(m, 2 * PAGE, MS_SYNC) == 0, "msync returns 0");
    CHECK(file_says(path, PAGE + 50, "synced"), "after msync another open reads the store");
    strcpy(m + PAGE + 100, "last store");
    CHECK(munmap(m, 2 * PAGE) == 0 && close(fd) == 0, "munmap and close");
    CHECK(file_says(path, 0, "from the child") && file_says(path, PAGE, "from the parent") &&
              file_says(path, PAGE + 100, "last store") && file_says(path, 200, "written"),
          "the file holds every store after munmap and close");

    /* A MAP_PRIVATE mapping of the file is a copy: its stores stay its own. */
    fd = open(path, O_RDWR);
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    strcpy(p, "private");
    CHECK(file_says(path, 0, "from the child"), "a MAP_PRIVATE store does not reach the file");
    munmap(p, PAGE);
    close(fd);
    unlink(path);
}

/* `keyframes N`: a child stores into shared anonymous memory and into a
 * file mapped shared (/tmp/held, never written with write()), makes N
 * calls (long enough for keyframes), stores again and exits; its parent
 * checks both stores. For seeks and forks inside the child's calls. */
static int keyframes(int calls)
{
    long *n = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fd = open("/tmp/held", O_RDWR | O_CREAT | O_TRUNC, 0644);
    ftruncate(fd, PAGE);
    char *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    /* The parent's pages are present before the fork. */
    *n = 0;
    m[PAGE - 1] = 0;
    pid_t pid = fork();
    if (pid == 0) {
        strcpy(m, "stored through the mapping\n");
        *n = 1;
        for (int i = 0; i < calls; i++)
            getppid();
        strcpy(m + 100, "after the calls");
        *n = 2;
        _exit(0);
    }
    wait_child(pid);
    char buf[32] = {0};
    pread(fd, buf, 15, 100);
    CHECK(*n == 2, "the child's stores to shared memory: %ld", *n);
    CHECK(!strcmp(buf, "after the calls") && !strcmp(m, "stored through the mapping\n"),
          "the child's stores to the file: %s", buf);
    return failures != 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "keyframes"))
        return keyframes(atoi(argv[2]));
    anonymous();
    file();
    if (!failures)
        printf("all passed\n");
    return failures != 0;
}
