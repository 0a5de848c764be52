/* hello: the smallest program; tests/build.rs also builds it dynamically
 * linked, which `rewind run` must refuse with a clear message. */
#include <stdio.h>

int main(int argc, char **argv)
{
    printf("hello from %s with %d argument(s)\n", argv[0], argc - 1);
    return 0;
}
