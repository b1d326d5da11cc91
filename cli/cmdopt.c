/* cmdopt.c - see cmdopt.h. */
#include "cmdopt.h"

#include <string.h>

const char *cp_opt_value(const char *a, const char *name, int argc, char **argv, int *i, int *bad)
{
    size_t l = strlen(name);
    if (strncmp(a, name, l))
        return NULL;
    if (a[l] == '=')
        return a + l + 1;
    if (a[l])
        return NULL;
    if (*i + 1 >= argc) {
        *bad = 1;
        return NULL;
    }
    return argv[++*i];
}
