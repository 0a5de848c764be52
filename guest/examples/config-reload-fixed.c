/* config-reload-fixed: the config is written to a temporary file and renamed over the old one.
 *
 * config-reload.c's writer truncates the config and writes it in place, so
 * a reader can find it empty or half-written. Here the writer writes
 * /tmp/app.conf.tmp whole and renames it over /tmp/app.conf: rename
 * replaces the name at once, so a reader opens the old file or the new
 * one, never a mix. Exit status 1 would mean a torn read.
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

/* The config of version v: two lines, the second a checksum of the first,
 * written whole to a temporary file that then replaces the config. */
static void write_config(int v)
{
    char line[64];
    int fd = open(CONFIG ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = snprintf(line, sizeof line, "version=%d\n", v);
    write(fd, line, n);
    n = snprintf(line, sizeof line, "checksum=%d\n", v * 7 + 1);
    write(fd, line, n);
    close(fd);
    rename(CONFIG ".tmp", CONFIG);
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
