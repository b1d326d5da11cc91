/* pyframes.c - the tool's frames marked, the frames at the raise on the raising thread, and an
 * exception frame's source line and locals (see pyframes.h). */
#include "pyframes.h"
#include "jpath.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define PYFRAMES_MAX 4096 /* frames of one rebuilt stack (python.h's PY_MAX_FRAMES) */

/* s cut to at most max bytes (never inside a UTF-8 sequence; with `dots`, a cut string ends in
 * "..." within max), valid UTF-8, as a JSON string. */
static cJSON *cut_string(const char *s, size_t max, int dots)
{
    size_t l = strlen(s);
    char *tmp = NULL;
    if (l > max) {
        size_t c = dots && max > 3 ? max - 3 : max;
        while (c && ((unsigned char)s[c] & 0xc0) == 0x80)
            c--;
        tmp = malloc(c + 4);
        if (!tmp)
            return cJSON_CreateString("");
        memcpy(tmp, s, c);
        memcpy(tmp + c, dots ? "..." : "", dots ? 4 : 1);
        s = tmp;
    }
    char *c = cp_utf8_clean(s);
    cJSON *o = cJSON_CreateString(c ? c : "");
    free(c);
    free(tmp);
    return o;
}

/* {name: repr} of at most PYFRAMES_LOCALS_MAX string members; *cut when some were left out. */
static cJSON *locals_obj(const cJSON *in, int *cut)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, in)
    {
        if (!v->string || !cJSON_IsString(v) || !v->string[0]) {
            *cut = 1;
            continue;
        }
        if (n == PYFRAMES_LOCALS_MAX) {
            *cut = 1;
            break;
        }
        cJSON *name = cut_string(v->string, PYFRAMES_LOCAL_NAME_MAX, 0);
        cJSON_AddItemToObject(o, name->valuestring,
                              cut_string(v->valuestring, PYFRAMES_LOCAL_VALUE_MAX, 1));
        cJSON_Delete(name);
        n++;
    }
    return o;
}

void pyframes_exc_extras(cJSON *o, const cJSON *f)
{
    const char *src = cp_jstr(f, "source");
    cJSON_AddItemToObject(
        o, "source", src && *src ? cut_string(src, PYFRAMES_SOURCE_MAX, 1) : cJSON_CreateNull());
    const cJSON *loc = cp_jkey(f, "locals");
    if (!cJSON_IsObject(loc))
        return;
    int cut = cJSON_IsTrue(cp_jkey(f, "locals_truncated"));
    cJSON_AddItemToObject(o, "locals", locals_obj(loc, &cut));
    if (cut)
        cJSON_AddTrueToObject(o, "locals_truncated");
}

static int ends_with(const char *s, size_t l, const char *suffix)
{
    size_t n = strlen(suffix);
    return l >= n && !memcmp(s + l - n, suffix, n) && (l == n || s[l - n - 1] == '/');
}

int pyframes_is_tool(const char *file)
{
    static const char *const tool[] = {"crashpack/__init__.py", "crashpack/_report.py",
                                       "crashpack/checkpoint.py", "_crashpack_hook.py",
                                       "crashpack_checkpoint.py"};
    size_t l = file ? strlen(file) : 0;
    for (size_t i = 0; l && i < sizeof(tool) / sizeof(tool[0]); i++)
        if (ends_with(file, l, tool[i]))
            return 1;
    return 0;
}

/* Marks each tool frame of the thread; the index of the outermost one, or -1. */
static int mark_tool(cJSON *t)
{
    cJSON *f;
    int i = 0, last = -1;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "python_frames"))
    {
        if (cJSON_IsObject(f) && pyframes_is_tool(cp_jstr(f, "file"))) {
            cp_json_set(f, "tool", cJSON_CreateTrue());
            cJSON_DeleteItemFromObjectCaseSensitive(f, "locals"); /* the hook's request, etc. */
            cJSON_DeleteItemFromObjectCaseSensitive(f, "locals_truncated");
            last = i;
        }
        i++;
    }
    return last;
}

static int same_str(const cJSON *a, const cJSON *b, const char *key)
{
    const char *x = cp_jstr(a, key), *y = cp_jstr(b, key);
    return x && y && !strcmp(x, y);
}

/* A frame at the raise: the exception's frame e as a python_frames[] entry. */
static cJSON *raise_frame(const cJSON *e)
{
    cJSON *o = cJSON_CreateObject();
    static const char *const keys[] = {"function", "qualname",        "file", "line", "source",
                                       "locals",   "locals_truncated"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const cJSON *v = cp_jkey(e, keys[i]);
        if (i != 1 && i < 3 && !cJSON_IsString(v)) /* a frame's function and file: strings */
            cJSON_AddStringToObject(o, keys[i], "?");
        else if (v)
            cJSON_AddItemToObject(o, keys[i], cJSON_Duplicate(v, 1));
        else if (i < 5)
            cJSON_AddNullToObject(o, keys[i]);
    }
    cJSON_AddFalseToObject(o, "entry");
    cJSON_AddNullToObject(o, "native_frame_index");
    cJSON_AddTrueToObject(o, "traceback");
    return o;
}

/* The raising thread's Python frames: the hook's (live frames 0..tool), the frames at the raise
 * (innermost first), then the live frames outside the one the traceback starts at. */
static void put_raise_frames(cJSON *t, int tool, const cJSON *exc_frames)
{
    cJSON *live = cJSON_GetObjectItemCaseSensitive(t, "python_frames");
    int nexc = cJSON_GetArraySize(exc_frames);
    if (nexc <= 0 || nexc > PYFRAMES_MAX || !cJSON_IsArray(live))
        return;
    const cJSON **ex = malloc((size_t)nexc * sizeof(*ex)), *e;
    if (!ex)
        return;
    int k = 0;
    cJSON_ArrayForEach(e, exc_frames) ex[k++] = e;
    cJSON *out = cJSON_CreateArray();
    const cJSON *f = live->child, *rest = NULL;
    int j = 0, n = 0;
    for (; f && j <= tool; f = f->next, j++, n++)
        cJSON_AddItemToArray(out, cJSON_Duplicate(f, 1));
    /* the live frames after the hook's: the traceback starts at one of them, or at none */
    rest = f;
    for (const cJSON *g = f; g && j < PYFRAMES_MAX; g = g->next, j++)
        if (same_str(g, ex[0], "function") && same_str(g, ex[0], "file")) {
            rest = g->next;
            break;
        }
    for (k = nexc - 1; k >= 0; k--, n++)
        cJSON_AddItemToArray(out, raise_frame(ex[k]));
    for (; rest && n < PYFRAMES_MAX; rest = rest->next, n++)
        cJSON_AddItemToArray(out, cJSON_Duplicate(rest, 1));
    free(ex);
    cp_json_set(t, "python_frames", out);
}

void pyframes_finish(cJSON *r)
{
    const char *kind = cp_jstr_at(r, "process.death.kind"),
               *src = cp_jstr_at(r, "process.crashed_tid_source");
    double ctid = -1;
    int raising = kind && !strcmp(kind, "exception") && src && !strcmp(src, "exception") &&
                  cp_jnum_at(r, "process.crashed_tid", &ctid);
    const cJSON *exc_frames = cp_jpath(r, "exception.frames");
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "threads"))
    {
        int tool = mark_tool(t);
        double tid;
        if (raising && cp_jnum(t, "tid", &tid) && tid == ctid && cJSON_IsArray(exc_frames)) {
            put_raise_frames(t, tool, exc_frames);
            raising = 0; /* one thread */
        }
    }
}
