/* slim.c - `crashpack report --slim OUT`: placeholder until the slim writer lands. */
#include "errmsg.h"
#include <stddef.h>
int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen);
int slim_write(const char *bundle, const char *out, char *err, size_t errlen, char *summary,
               size_t sumlen)
{
    (void)bundle;
    (void)out;
    (void)summary;
    (void)sumlen;
    cp_errmsg(err, errlen, "not implemented yet");
    return -1;
}
