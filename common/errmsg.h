/* errmsg.h - library code reports errors as text in a caller's buffer, never on a terminal. */
#ifndef CRASHPACK_ERRMSG_H
#define CRASHPACK_ERRMSG_H
#include <stddef.h>

/* printf into buf (len bytes, always terminated); a NULL or empty buffer is ignored. */
void cp_errmsg(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
