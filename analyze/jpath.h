/* jpath.h - one way to read a nested value of a report: cp_jpath(r, "process.signal.number"). */
#ifndef CRASHPACK_JPATH_H
#define CRASHPACK_JPATH_H
#include <cjson/cJSON.h>

/* The value at a dot-separated path of object keys (each key < 64 bytes), or NULL when a step is
 * missing or not an object. Never allocates. */
const cJSON *cp_jpath(const cJSON *o, const char *path);

#endif
