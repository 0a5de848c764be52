/* config-reload: a config file rewritten in place (truncated, then written) is read half-written.
 *
 * The writer thread rewrites /tmp/app.conf three times: it opens it with
 * O_TRUNC, writes the version line, then the checksum line, and closes it.
 * The reader thread rereads the file between the writer's updates and
 * prints what it found: `read version=N` for a whole config, `torn: ...`
 * for an empty or half-written one. A reader that looks between the
 * truncation and the last write sees a torn config. The fix,
 * config-reload-fixed.c, writes a temporary file and renames it over the
 * config, so a reader sees the old file or the new one, never a mix.
 * Exit status 1 means the reader saw a torn config; the property script
 * guest/examples/config-reload.check spots the `torn` line in the output.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONFIG "/tmp/app.conf"
#define UPDATES 3

static int torn;

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* The config of version v: two lines, the second a checksum of the first. */
static void write_config(int v)
{
    char line[64];
    int fd = open(CONFIG, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = snprintf(line, sizeof line, "version=%d\n", v);
    write(fd, line, n);
    n = snprintf(line, sizeof line, "checksum=%d\n", v * 7 + 1);
    write(fd, line, n);
    close(fd);
}

static void *writer(void *arg)
{
    (void)arg;
    for (int v = 1; v <= UPDATES; v++) {
        write_config(v);
        nap();
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < UPDATES + 1; i++) {
        char buf[128] = {0};
        int fd = open(CONFIG, O_RDONLY);
        int n = read(fd, buf, sizeof buf - 1);
        close(fd);
        int v, sum;
        if (n > 0 && sscanf(buf, "version=%d\nchecksum=%d\n", &v, &sum) == 2 && sum == v * 7 + 1) {
            printf("read version=%d\n", v);
        } else {
            printf("torn: %d bytes\n", n);
            torn = 1;
        }
        nap();
    }
    return NULL;
}

int main(void)
{
    write_config(0);
    pthread_t w, r;
    /* The writer first: it runs first, and the reader is runnable (not
     * napping) during its first update, so one switch decides the race. */
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    return torn;
}
