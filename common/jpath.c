/* jpath.c - JSON path access and the getter family (see jpath.h). */
#include "jpath.h"

#include <stdlib.h>
#include <string.h>

const cJSON *cp_jpath(const cJSON *o, const char *path)
{
    char key[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof(key))
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return o;
}

const cJSON *cp_jkey(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* The value-level checks both forms share. */
static const char *str_of(const cJSON *v)
{
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static const char *str_ne_of(const cJSON *v)
{
    const char *s = str_of(v);
    return s && *s ? s : NULL;
}

static int num_of(const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

static int bool_of(const cJSON *v, int *out)
{
    if (!cJSON_IsBool(v))
        return 0;
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 1;
}

const char *cp_jstr(const cJSON *o, const char *key)
{
    return str_of(cp_jkey(o, key));
}
const char *cp_jstr_at(const cJSON *o, const char *path)
{
    return str_of(cp_jpath(o, path));
}
const char *cp_jstr_ne(const cJSON *o, const char *key)
{
    return str_ne_of(cp_jkey(o, key));
}
const char *cp_jstr_ne_at(const cJSON *o, const char *path)
{
    return str_ne_of(cp_jpath(o, path));
}

const char *cp_jstr_or(const cJSON *o, const char *key, const char *dflt)
{
    const char *s = cp_jstr(o, key);
    return s ? s : dflt;
}

const char *cp_jstr_or_at(const cJSON *o, const char *path, const char *dflt)
{
    const char *s = cp_jstr_at(o, path);
    return s ? s : dflt;
}

char *cp_jstrdup(const cJSON *o, const char *key)
{
    const char *s = cp_jstr(o, key);
    return s ? strdup(s) : NULL;
}

int cp_jstrcpy(const cJSON *o, const char *key, char *buf, size_t len)
{
    const char *s = cp_jstr(o, key);
    size_t n = s ? strlen(s) : 0;
    if (!s || n >= len)
        return 0;
    memcpy(buf, s, n + 1);
    return 1;
}

int cp_jnum(const cJSON *o, const char *key, double *out)
{
    return num_of(cp_jkey(o, key), out);
}
int cp_jnum_at(const cJSON *o, const char *path, double *out)
{
    return num_of(cp_jpath(o, path), out);
}

double cp_jnum_or(const cJSON *o, const char *key, double dflt)
{
    double v;
    return cp_jnum(o, key, &v) ? v : dflt;
}

double cp_jnum_or_at(const cJSON *o, const char *path, double dflt)
{
    double v;
    return cp_jnum_at(o, path, &v) ? v : dflt;
}

int cp_juint(const cJSON *o, const char *key, uint64_t max, uint64_t *out)
{
    double d;
    /* !(d >= 0) also refuses NaN; the round trip refuses fractions */
    if (!cp_jnum(o, key, &d) || !(d >= 0) || d > (double)max || d != (double)(uint64_t)d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

int cp_jbool(const cJSON *o, const char *key, int *out)
{
    return bool_of(cp_jkey(o, key), out);
}
int cp_jbool_at(const cJSON *o, const char *path, int *out)
{
    return bool_of(cp_jpath(o, path), out);
}

const cJSON *cp_jobj(const cJSON *o, const char *key)
{
    const cJSON *v = cp_jkey(o, key);
    return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *cp_jobj_at(const cJSON *o, const char *path)
{
    const cJSON *v = cp_jpath(o, path);
    return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *cp_jarr(const cJSON *o, const char *key)
{
    const cJSON *v = cp_jkey(o, key);
    return cJSON_IsArray(v) ? v : NULL;
}

const cJSON *cp_jarr_at(const cJSON *o, const char *path)
{
    const cJSON *v = cp_jpath(o, path);
    return cJSON_IsArray(v) ? v : NULL;
}

void cp_json_set(cJSON *o, const char *key, cJSON *v)
{
    if (!v)
        v = cJSON_CreateNull();
    if (!o || !v) {
        cJSON_Delete(v);
        return;
    }
    /* the key may be v's own name, which replacing or adding frees: then a copy */
    char *k = v->string && key == v->string ? strdup(key) : NULL;
    if (k)
        key = k;
    else if (v->string && key == v->string) {
        cJSON_Delete(v);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else
        cJSON_AddItemToObject(o, key, v);
    free(k);
}

/* ---- index by a numeric member ---- */

static int jindex_cmp(const void *a, const void *b)
{
    const struct cp_jindex_ent *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

int cp_jindex_build(struct cp_jindex *ix, const cJSON *arr, const char *path)
{
    ix->e = NULL;
    ix->n = 0;
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    if (n <= 0)
        return 0;
    ix->e = malloc((size_t)n * sizeof(*ix->e));
    if (!ix->e)
        return -1;
    size_t pos = 0;
    for (const cJSON *it = arr->child; it; it = it->next, pos++) {
        double v;
        if (cp_jnum_at(it, path, &v) && v == v) /* NaN has no order */
            ix->e[ix->n++] = (struct cp_jindex_ent){v, pos, it};
    }
    qsort(ix->e, ix->n, sizeof(*ix->e), jindex_cmp);
    return 0;
}

size_t cp_jindex_first(const struct cp_jindex *ix, double key)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->e[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && ix->e[lo].key == key ? lo : ix->n;
}

const cJSON *cp_jindex_find(const struct cp_jindex *ix, double key)
{
    size_t i = cp_jindex_first(ix, key);
    return i < ix->n ? ix->e[i].item : NULL;
}

void cp_jindex_free(struct cp_jindex *ix)
{
    free(ix->e);
    ix->e = NULL;
    ix->n = 0;
}
