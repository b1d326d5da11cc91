/* lazylib.h - a shared library opened the first time a bundle needs it, not at every start.
 *
 * libxml2 (which pulls in ICU) and libzip (which pulls in libcrypto) add about 5 ms of mapping and
 * relocation to every `crashpack` start on the CI VMs, while most runs read no nvidia-smi XML and
 * no checkpoint. gpu_smi.c and checkpoint.c open them here, by the SONAME the build linked against
 * (CMake reads it from the library: CP_SONAME_LIBXML2, CP_SONAME_LIBZIP), and resolve each
 * function into a pointer of the function's own declared type (so the headers still check every
 * call). Single-threaded use: the first call opens, later calls return the same handle.
 */
#ifndef CRASHPACK_LAZYLIB_H
#define CRASHPACK_LAZYLIB_H

#include <stddef.h>

struct cp_lazylib {
    const char *soname;
    void *handle;
    int failed;     /* dlopen failed once: not tried again */
    char why[256];  /* dlerror() of that failure */
};

/* The library's handle, opened on first use (RTLD_NOW | RTLD_LOCAL). NULL with err set ("libxml2.so.2
 * cannot be loaded: ...") when it cannot be. */
void *cp_lazylib_open(struct cp_lazylib *l, char *err, size_t errlen);

/* Symbol `name` of the opened library l; NULL with err set when it is missing. */
void *cp_lazylib_sym(struct cp_lazylib *l, const char *name, char *err, size_t errlen);

/* Resolves function `fn` of lib into slot (a pointer of __typeof__(&fn)): 0, or -1 with err. */
#define CP_LAZY_FN(lib, slot, fn, err, errlen)                                                     \
    (((slot) = (__typeof__(slot))cp_lazylib_sym((lib), #fn, (err), (errlen))) ? 0 : -1)

#endif
