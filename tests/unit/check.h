/* check.h - the unit tests' CHECK(cond, fmt, ...): prints "ok: ..." or "FAIL: ..." and counts the
 * failures in `fails`, which main() turns into the exit status. */
#ifndef CRASHPACK_TEST_CHECK_H
#define CRASHPACK_TEST_CHECK_H
#include <stdio.h>

static int fails;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            printf("ok: " __VA_ARGS__);                                                            \
        } else {                                                                                   \
            printf("FAIL: " __VA_ARGS__);                                                          \
            fails++;                                                                               \
        }                                                                                          \
        putchar('\n');                                                                             \
    } while (0)

#endif
