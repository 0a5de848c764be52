/* two-writers: with argument "shared", two threads append to /shared.log;
 * otherwise each thread writes its own /own-N.log. For the single-writer
 * property. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int shared;

static void *writer(void *arg)
{
    long id = (long)arg;
    char path[32];
    if (shared)
        snprintf(path, sizeof path, "/shared.log");
    else
        snprintf(path, sizeof path, "/own-%ld.log", id);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return (void *)1;
    char line[32];
    int n = snprintf(line, sizeof line, "writer %ld\n", id);
    write(fd, line, n);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    shared = argc > 1 && strcmp(argv[1], "shared") == 0;
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, writer, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    puts("done");
    return 0;
}
