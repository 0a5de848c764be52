/* write-twice: creates /out.txt, writes a line, makes two more calls,
 * writes a second line. For `rewind cat` at steps before and after. */
#include <fcntl.h>
#include <unistd.h>

int main(void)
{
    int fd = open("/out.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0)
        return 1;
    write(fd, "first\n", 6);
    getpid();
    getpid();
    write(fd, "second\n", 7);
    close(fd);
    getpid();
    return 0;
}
