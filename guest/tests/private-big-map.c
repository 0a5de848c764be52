/* private-big-map: a private, writable mapping of a large file (argv[1];
 * inside Rewind an image file the monitor backs guest frames with rather
 * than copying). The mapping reads as the file, zeros past its end on the
 * last page; stores to it are the mapping's alone: a forked child sees the
 * parent's stores and its own stay its own, a second mapping and read()
 * see the file unchanged. Prints `ok: ...` lines, then `all passed`: the
 * same natively and inside Rewind. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define PAGE 4096

static uint64_t sum(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0, "opened the file");
    size_t n = st.st_size, whole = (n + PAGE - 1) / PAGE * PAGE;
    unsigned char *copy = malloc(n);
    CHECK(copy && pread(fd, copy, n, 0) == (ssize_t)n, "read the file");
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(m != MAP_FAILED, "mapped it private and writable");
    CHECK(memcmp(m, copy, n) == 0, "the mapping reads as the file: %016llx",
          (unsigned long long)sum(m, n));
    int zeros = 1;
    for (size_t i = n; i < whole; i++)
        zeros &= m[i] == 0;
    CHECK(zeros, "the rest of the last page reads zeros");
    for (size_t i = 0; i < n; i += PAGE / 2)
        m[i] ^= 0x5a;
    m[n - 1] ^= 0x5a;
    m[whole - 1] = 7;
    uint64_t changed = sum(m, whole);
    CHECK(m[0] == (copy[0] ^ 0x5a) && m[whole - 1] == 7,
          "stores reach the mapping: %016llx", (unsigned long long)changed);
    pid_t pid = fork();
    if (pid == 0) {
        CHECK(sum(m, whole) == changed, "a forked child sees the parent's stores");
        for (size_t i = 0; i < n; i += PAGE)
            m[i] = 1;
        fflush(stdout);
        _exit(failures != 0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child passed");
    CHECK(sum(m, whole) == changed, "the child's stores stay the child's");
    unsigned char *again = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(again != MAP_FAILED && memcmp(again, copy, n) == 0,
          "a second mapping reads the file unchanged");
    unsigned char *back = malloc(n);
    CHECK(back && pread(fd, back, n, 0) == (ssize_t)n && memcmp(back, copy, n) == 0,
          "read() reads the file unchanged");
    CHECK(munmap(m, n) == 0 && munmap(again, n) == 0, "unmapped both");
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
