/* server: a test starts a TCP server, then its client connects "after a moment": sometimes before the server listens.
 *
 * The test starts the server on 127.0.0.1:8080 in its own thread and gives
 * it a moment (a short sleep) before the client connects. Usually the
 * server is listening by then. When the server is held up before `listen`
 * for longer than that moment, the client's connect meets no listener and
 * fails with ECONNREFUSED. The fix is server-fixed.c. Exit status 1 means
 * the client could not connect.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in address(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(8080)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Answers one request. */
static void *server(void *arg)
{
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = address();
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 8) != 0) {
        perror("server");
        return 0;
    }
    int c = accept(s, 0, 0);
    char req[64];
    ssize_t n = read(c, req, sizeof req);
    if (n > 0)
        write(c, "200 OK\n", 7);
    close(c);
    close(s);
    return 0;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, server, 0);
    /* "Give the server a moment to start." */
    struct timespec moment = {0, 20 * 1000};
    nanosleep(&moment, 0);

    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = address();
    if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("client: connect");
        return 1;
    }
    write(c, "GET /\n", 6);
    char reply[64] = {0};
    ssize_t n = read(c, reply, sizeof reply - 1);
    printf("client got: %s", n > 0 ? reply : "nothing\n");
    pthread_join(t, 0);
    return 0;
}
