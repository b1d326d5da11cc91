/* lazylib.c - shared libraries opened on first use (see lazylib.h). */
#include "lazylib.h"
#include <stdio.h>

#include <dlfcn.h>

void *cp_lazylib_open(struct cp_lazylib *l, char *err, size_t errlen)
{
    if (l->handle)
        return l->handle;
    if (!l->failed) {
        l->handle = dlopen(l->soname, RTLD_NOW | (l->global ? RTLD_GLOBAL : RTLD_LOCAL));
        if (!l->handle) {
            const char *e = dlerror();
            snprintf(l->why, sizeof(l->why), "%s", e ? e : "dlopen failed");
            l->failed = 1;
        }
    }
    if (!l->handle)
        snprintf(err, errlen, "%s cannot be loaded: %s", l->soname, l->why);
    return l->handle;
}

void *cp_lazylib_sym(struct cp_lazylib *l, const char *name, char *err, size_t errlen)
{
    void *p = cp_lazylib_open(l, err, errlen) ? dlsym(l->handle, name) : NULL;
    if (!p && l->handle)
        snprintf(err, errlen, "%s has no symbol %s", l->soname, name);
    return p;
}
