/* server-fixed: server.c with the client waiting for the server to say it listens.
 *
 * The server writes one byte to a pipe once `listen` has returned, and the
 * client reads it before it connects: however long the server is held up,
 * the client never connects before there is a listener.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int ready[2]; /* the server writes a byte here once it listens */

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
    write(ready[1], "!", 1);
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
    pipe(ready);
    pthread_create(&t, 0, server, 0);
    char go;
    if (read(ready[0], &go, 1) != 1) {
        fprintf(stderr, "client: the server never started\n");
        return 1;
    }

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
