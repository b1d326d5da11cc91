/* jpath.h - one way to read a nested value of a report (cp_jpath(r, "process.signal.number")) and
 * one way to set a member (cp_json_set). */
#ifndef CRASHPACK_JPATH_H
#define CRASHPACK_JPATH_H
#include <cjson/cJSON.h>

/* The value at a dot-separated path of object keys (each key < 64 bytes), or NULL when a step is
 * missing or not an object. Never allocates. */
const cJSON *cp_jpath(const cJSON *o, const char *path);

/* o[key] = v: replaces an existing member in place, else adds it. v NULL becomes null. key may be
 * v's own name (v->string), which is then copied first. */
void cp_json_set(cJSON *o, const char *key, cJSON *v);

#endif
