/* jpath.h - the one way crashpack reads JSON: a nested value by dotted path (cp_jpath(r,
 * "process.signal.number")), the getter family below, and one way to set a member (cp_json_set).
 *
 * Getters come in two forms with the same behaviour: by key (cp_jstr(o, "name"): one member of o,
 * the key taken literally, dots and all) and by dotted path (cp_jstr_at(r, "process.exe")).
 * Every getter accepts o == NULL or a non-object o and then finds nothing. Nothing allocates
 * except cp_jstrdup. Types are strict: a number stored as a string is not a number, a string
 * "true" is not a bool.
 *
 *   cp_jstr / _at        the string, "" included; NULL when absent or not a string
 *   cp_jstr_ne / _at     the same, but an empty string is NULL too
 *   cp_jstr_or / _at     the string, or dflt when absent or not a string
 *   cp_jstrdup           strdup of the string; NULL when absent, not a string or out of memory
 *   cp_jstrcpy           1 and the string copied into buf when it is a string shorter than len;
 *                        0 (buf untouched) otherwise
 *   cp_jnum / _at        1 and *out = the number; 0 (out untouched) when absent or not a number
 *   cp_jnum_or / _at     the number, or dflt
 *   cp_juint             1 and *out when an integral number in [0, max]; 0 otherwise
 *   cp_jbool / _at       1 and *out = 0/1 when a JSON bool; 0 (out untouched) otherwise
 *   cp_jobj / _at        the member when it is an object, else NULL
 *   cp_jarr / _at        the member when it is an array, else NULL
 */
#ifndef CRASHPACK_JPATH_H
#define CRASHPACK_JPATH_H
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/* The value at a dot-separated path of object keys (each key < 64 bytes), or NULL when a step is
 * missing or not an object. Never allocates. */
const cJSON *cp_jpath(const cJSON *o, const char *path);

/* o[key] (the key literally, case-sensitive), or NULL when o is NULL, not an object or lacks it. */
const cJSON *cp_jkey(const cJSON *o, const char *key);

const char *cp_jstr(const cJSON *o, const char *key);
const char *cp_jstr_at(const cJSON *o, const char *path);
const char *cp_jstr_ne(const cJSON *o, const char *key);
const char *cp_jstr_ne_at(const cJSON *o, const char *path);
const char *cp_jstr_or(const cJSON *o, const char *key, const char *dflt);
const char *cp_jstr_or_at(const cJSON *o, const char *path, const char *dflt);
char *cp_jstrdup(const cJSON *o, const char *key);
int cp_jstrcpy(const cJSON *o, const char *key, char *buf, size_t len);

int cp_jnum(const cJSON *o, const char *key, double *out);
int cp_jnum_at(const cJSON *o, const char *path, double *out);
double cp_jnum_or(const cJSON *o, const char *key, double dflt);
double cp_jnum_or_at(const cJSON *o, const char *path, double dflt);
int cp_juint(const cJSON *o, const char *key, uint64_t max, uint64_t *out);

int cp_jbool(const cJSON *o, const char *key, int *out);
int cp_jbool_at(const cJSON *o, const char *path, int *out);

const cJSON *cp_jobj(const cJSON *o, const char *key);
const cJSON *cp_jobj_at(const cJSON *o, const char *path);
const cJSON *cp_jarr(const cJSON *o, const char *key);
const cJSON *cp_jarr_at(const cJSON *o, const char *path);

/* o[key] = v: replaces an existing member in place, else adds it. v NULL becomes null. key may be
 * v's own name (v->string), which is then copied first. */
void cp_json_set(cJSON *o, const char *key, cJSON *v);

/* An array's elements by a numeric member (a dotted path: "tid", "hang_state.mutex_owner"), sorted
 * by (value, position): lookups by value in O(log n) where a loop over the array per lookup would
 * make a pass over n threads quadratic (issue 16, item 10). Elements without that number are not
 * in it. The index points into the array: it is valid while the array is unchanged. */
struct cp_jindex_ent {
    double key;
    size_t pos; /* the element's position in the array */
    const cJSON *item;
};
struct cp_jindex {
    struct cp_jindex_ent *e;
    size_t n;
};
/* 0, or -1 when out of memory (then the index is empty and finds nothing). */
int cp_jindex_build(struct cp_jindex *ix, const cJSON *arr, const char *path);
/* The first entry (in array order) whose value is key: its index in ix->e, or ix->n when none.
 * The entries with that value follow it, in array order. */
size_t cp_jindex_first(const struct cp_jindex *ix, double key);
/* The first element (in array order) whose value is key, or NULL. */
const cJSON *cp_jindex_find(const struct cp_jindex *ix, double key);
void cp_jindex_free(struct cp_jindex *ix);

#endif
