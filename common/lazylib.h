/* lazylib.h - a shared library opened the first time a bundle needs it, not at every start.
 *
 * Every shared library linked in is mapped and relocated at every `crashpack` start. Those that
 * most runs never call are opened here instead, by the SONAME CMake reads from the library
 * (CP_SONAME_*): libxml2 with ICU and libzip with libcrypto (~5 ms on the CI VMs; gpu_smi.c and
 * checkpoint.c, for nvidia-smi XML and zip checkpoints), libstdc++ (~4 ms; symbolize.c, for the
 * first C++ name to demangle) and libunwind (~1 ms; unwind_ucd.c, for the second unwinder).
 * Each function is resolved into a pointer of the function's own declared type, so the headers
 * still check every call. Single-threaded use: the first call opens, later calls return the
 * same handle.
 */
#ifndef CRASHPACK_LAZYLIB_H
#define CRASHPACK_LAZYLIB_H

#include <stddef.h>

struct cp_lazylib {
    const char *soname;
    int global;     /* RTLD_GLOBAL: its symbols resolve the next libraries (libunwind-coredump
                       leaves libunwind's to whoever loaded it) */
    void *handle;
    int failed;     /* dlopen failed once: not tried again */
    char why[256];  /* dlerror() of that failure */
};

/* The library's handle, opened on first use (RTLD_NOW, and RTLD_LOCAL unless global). NULL with
 * err set ("libxml2.so.2 cannot be loaded: ...") when it cannot be. */
void *cp_lazylib_open(struct cp_lazylib *l, char *err, size_t errlen);

/* Symbol `name` of the opened library l; NULL with err set when it is missing. */
void *cp_lazylib_sym(struct cp_lazylib *l, const char *name, char *err, size_t errlen);

/* Resolves function `fn` of lib into slot (a pointer of __typeof__(&fn)): 0, or -1 with err. fn
 * is macro-expanded before it is named, so libunwind's unw_step finds _Ux86_64_step. */
#define CP_LAZY_STR_(x) #x
#define CP_LAZY_NAME(x) CP_LAZY_STR_(x)
#define CP_LAZY_FN(lib, slot, fn, err, errlen)                                                     \
    (((slot) = (__typeof__(slot))cp_lazylib_sym((lib), CP_LAZY_NAME(fn), (err), (errlen))) ? 0 : -1)

#endif
