/* rewind.h: the Rewind guest SDK for C and C++ (header only).
 *
 *   always(cond, msg)     an assertion every run must keep: a run where it
 *                         is false violates the `sdk` property of
 *                         `rewind check`;
 *   sometimes(cond, msg)  something at least one run of a check must see
 *                         true (a schedule the check must reach);
 *   bookmark(msg)         a named point in the run, shown among its events.
 *
 * Each is one reserved system call (0x5257, "RW") that Rewind records as an
 * event. Outside Rewind Linux answers it with ENOSYS and the call does
 * nothing, so a program built with the SDK runs unchanged anywhere.
 * x86-64 Linux only; define REWIND_SDK_DISABLE to compile every call away.
 * Define REWIND_SDK_PREFIX to get rewind_always, rewind_sometimes and
 * rewind_bookmark instead of the short names.
 */
#ifndef REWIND_SDK_H
#define REWIND_SDK_H

#include <string.h>

#define REWIND_SDK_SYSCALL 0x5257
#define REWIND_SDK_ALWAYS 0
#define REWIND_SDK_SOMETIMES 1
#define REWIND_SDK_BOOKMARK 2

/* The raw call: sdk(kind, cond, message, length). Returns 0 under Rewind,
 * -ENOSYS (-38) elsewhere. */
static inline long rewind_sdk_call(long kind, long cond, const char *msg, unsigned long len)
{
#if defined(__x86_64__) && defined(__linux__) && !defined(REWIND_SDK_DISABLE)
    long ret;
    register long r10 __asm__("r10") = (long)len;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)REWIND_SDK_SYSCALL), "D"(kind), "S"(cond), "d"(msg), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#else
    (void)kind; (void)cond; (void)msg; (void)len;
    return -38;
#endif
}

static inline void rewind_always(int cond, const char *msg)
{
    rewind_sdk_call(REWIND_SDK_ALWAYS, cond != 0, msg, msg ? strlen(msg) : 0);
}

static inline void rewind_sometimes(int cond, const char *msg)
{
    rewind_sdk_call(REWIND_SDK_SOMETIMES, cond != 0, msg, msg ? strlen(msg) : 0);
}

static inline void rewind_bookmark(const char *msg)
{
    rewind_sdk_call(REWIND_SDK_BOOKMARK, 1, msg, msg ? strlen(msg) : 0);
}

#ifndef REWIND_SDK_PREFIX
static inline void always(int cond, const char *msg) { rewind_always(cond, msg); }
static inline void sometimes(int cond, const char *msg) { rewind_sometimes(cond, msg); }
static inline void bookmark(const char *msg) { rewind_bookmark(msg); }
#endif

#endif /* REWIND_SDK_H */
