/* scribble: writes bytes at pseudo-random places of 4 MiB, a system call
 * between rounds (argv[1] rounds, default 20000), then prints a checksum
 * of the whole buffer: a keyframe that missed a written page makes a fork
 * from it print another sum. A child process scribbles on its own copy. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (4 << 20)

static unsigned long scribble(unsigned char *p, long rounds, unsigned long x)
{
    for (long r = 0; r < rounds; r++) {
        for (int k = 0; k < 16; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p[x % SIZE] += (unsigned char)x;
        }
        getppid();
    }
    unsigned long sum = 0;
    for (long i = 0; i < SIZE; i++)
        sum = sum * 31 + p[i];
    return sum;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    unsigned char *p = calloc(SIZE, 1);
    if (!p)
        return 2;
    pid_t child = fork();
    if (child == 0) {
        printf("child %lx\n", scribble(p, rounds / 4, 7));
        return 0;
    }
    unsigned long sum = scribble(p, rounds, 88172645463325252UL);
    int status;
    waitpid(child, &status, 0);
    printf("parent %lx\n", sum);
    return 0;
}
