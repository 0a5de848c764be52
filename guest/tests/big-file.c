/* big-file: appends N lines (argv[1], default 20000) of 1 KiB to /big.log,
 * one write each, so that the overlay holds a large file while keyframes
 * are taken; prints the file's size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    int fd = open("/big.log", O_CREAT | O_WRONLY | O_APPEND, 0644);
    if (fd < 0)
        return 1;
    char line[1024];
    for (long i = 0; i < n; i++) {
        memset(line, 'a' + i % 26, sizeof line);
        snprintf(line, 32, "%ld", i);
        line[sizeof line - 1] = '\n';
        if (write(fd, line, sizeof line) != sizeof line)
            return 2;
    }
    close(fd);
    struct stat st;
    stat("/big.log", &st);
    printf("size %lld\n", (long long)st.st_size);
    return 0;
}
