/* segv: looks up an account that does not exist and adds to the balance of
 * the NULL pointer it got back: a fault at address 0x108, the offset of
 * `balance`. The run ends killed by SIGSEGV. */
#include <stdio.h>

struct account {
    char name[0x108];
    long balance;
};

struct account *volatile accounts; /* no accounts at all: NULL */

int main(void)
{
    volatile struct account *carol = accounts;
    printf("paying carol\n");
    fflush(stdout);
    carol->balance += 10;
    printf("paid\n");
    return 0;
}
