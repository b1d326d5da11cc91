/* draft.c - `crashpack rules add --from-crash ID`: a rule drafted from a stored crash's facts, for
 * a person to edit. The draft's conditions are the crash kind (or signal), the crashed thread's
 * first frame outside libc (a hang, which has no crashed thread: its deadlock and the locks in it,
 * or the locks its threads wait for, and the frame its waiting threads wait in, in as many
 * threads), the Xid codes and the log error categories it had; its tests are a
 * positive case made of those facts and a near-miss that changes only the first condition, so a
 * fresh draft already passes `crashpack rules test`. */
#include "kb_internal.h"
#include "errmsg.h"
#include "jpath.h"
#include "query.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static int boring(const char *fn, const char *mod)
{
    static const char *skip[] = {
        "raise",        "abort",    "__pthread_kill*", "pthread_kill*",   "__GI_*",
        "gsignal",      "__libc_*", "__assert*",       "std::terminate*", "__cxa_*",
        "__gnu_cxx::*", "_start",   "__restore_rt",    "malloc_printerr", "__fortify_fail"};
    if (!fn || !*fn || !strcmp(fn, "??"))
        return 1;
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (!fnmatch(skip[i], fn, 0))
            return 1;
    return mod && (strstr(mod, "libc.so") || strstr(mod, "libstdc++") || strstr(mod, "libgcc_s"));
}

/* The first condition: the crash kind, else the signal; else none (the first frame below then
 * stands first). */
static void draft_kind(cJSON *all, cJSON *pos, const cJSON *facts)
{
    const char *kind = cp_jstr_ne(facts, "crash_kind"), *signal = cp_jstr_ne(facts, "signal");
    if (kind) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "crash_kind", kind);
        cJSON_AddItemToArray(all, c);
        cJSON_AddStringToObject(pos, "crash_kind", kind);
    } else if (signal) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "signal", signal);
        cJSON_AddItemToArray(all, c);
        cJSON *pr = cJSON_AddObjectToObject(pos, "process");
        cJSON *sg = cJSON_AddObjectToObject(pr, "signal");
        cJSON_AddStringToObject(sg, "name", signal);
    }
}

/* The crashed thread's first frame outside libc and the C++ runtime. */
static void draft_frame(cJSON *all, cJSON *pos, const cJSON *facts)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(facts, "frames"))
    {
        const char *fn = cp_jstr_ne(f, "function"), *mod = cp_jstr_ne(f, "module");
        if (boring(fn, mod))
            continue;
        cJSON *c = cJSON_CreateObject(), *fr = cJSON_AddObjectToObject(c, "frame");
        cJSON_AddStringToObject(fr, "function", fn);
        cJSON_AddNumberToObject(fr, "top", 8);
        cJSON_AddItemToArray(all, c);
        cJSON *ths = cJSON_AddArrayToObject(pos, "threads"), *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "tid", 1);
        cJSON_AddTrueToObject(t, "crashed");
        cJSON *frs = cJSON_AddArrayToObject(t, "frames"), *one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "function", fn);
        cJSON_AddStringToObject(one, "module", mod ? mod : "");
        cJSON_AddItemToArray(frs, one);
        cJSON_AddItemToArray(ths, t);
        return;
    }
}

/* The Xid codes, and the first log error's category. */
static void draft_evidence(cJSON *all, cJSON *pos, const cJSON *facts)
{
    const cJSON *x = cJSON_GetObjectItem(facts, "xid");
    if (cJSON_GetArraySize(x) > 0) {
        cJSON *c = cJSON_CreateObject(), *xo = cJSON_AddObjectToObject(c, "xid");
        cJSON_AddItemToObject(xo, "codes", cJSON_Duplicate(x, 1));
        cJSON_AddItemToArray(all, c);
        cJSON *g = cJSON_AddObjectToObject(pos, "gpu"), *xs = cJSON_AddArrayToObject(g, "xid"), *e;
        cJSON_ArrayForEach(e, x)
        {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "code", e->valuedouble);
            cJSON_AddItemToArray(xs, o);
        }
    }
    const cJSON *le = cJSON_GetArrayItem(cJSON_GetObjectItem(facts, "log_errors"), 0);
    if (le && cp_jstr_ne(le, "category")) {
        cJSON *c = cJSON_CreateObject(), *lo = cJSON_AddObjectToObject(c, "log_error");
        cJSON_AddStringToObject(lo, "category", cp_jstr_ne(le, "category"));
        cJSON_AddItemToArray(all, c);
        cJSON *lg = cJSON_AddObjectToObject(pos, "log"), *es = cJSON_AddArrayToObject(lg, "errors");
        cJSON_AddItemToArray(es, cJSON_Duplicate(le, 1));
    }
}

/* The positive case's thread i (created up to it). */
static cJSON *pos_thread(cJSON *pos, int i)
{
    cJSON *ths = cJSON_GetObjectItem(pos, "threads");
    if (!ths)
        ths = cJSON_AddArrayToObject(pos, "threads");
    while (cJSON_GetArraySize(ths) <= i) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "tid", cJSON_GetArraySize(ths) + 1);
        cJSON_AddItemToArray(ths, t);
    }
    return cJSON_GetArrayItem(ths, i);
}

/* A hang's locks (issue 23): the deadlock's, or those its threads wait for. */
static void draft_hang_locks(cJSON *all, cJSON *pos, const cJSON *h)
{
    const cJSON *dl = cJSON_GetObjectItem(h, "deadlock"), *lw = cJSON_GetObjectItem(h, "lock_wait");
    const cJSON *locks = cJSON_GetObjectItem(dl ? dl : lw, "locks"), *l;
    if (dl) {
        cJSON *c = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(c, "deadlock");
        if (cJSON_GetArraySize(locks) > 0)
            cJSON_AddItemToObject(d, "locks", cJSON_Duplicate(locks, 1));
        cJSON_AddItemToArray(all, c);
        cJSON *hg = cJSON_AddObjectToObject(pos, "hang"),
              *ds = cJSON_AddArrayToObject(hg, "deadlocks");
        cJSON *one = cJSON_CreateObject(), *ts = cJSON_AddArrayToObject(one, "threads");
        cJSON_AddStringToObject(one, "lock",
                                cp_jstr_ne(dl, "lock") ? cp_jstr_ne(dl, "lock") : "pthread_mutex");
        cJSON_ArrayForEach(l, locks)
        {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "tid", cJSON_GetArraySize(ts) + 1);
            cJSON_AddStringToObject(t, "waits_for_mutex_symbol", cJSON_GetStringValue(l));
            cJSON_AddItemToArray(ts, t);
        }
        cJSON_AddItemToArray(ds, one);
    } else if (lw && cp_jstr_ne(lw, "type")) {
        int n = (int)cp_jnum_or(lw, "threads", 1);
        cJSON *c = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(c, "lock_wait");
        cJSON_AddStringToObject(o, "type", cp_jstr_ne(lw, "type"));
        if (cJSON_GetArraySize(locks) > 0)
            cJSON_AddItemToObject(o, "lock", cJSON_Duplicate(locks, 1));
        cJSON_AddNumberToObject(o, "min_threads", n);
        cJSON_AddItemToArray(all, c);
        for (int i = 0; i < n; i++) {
            cJSON *hs = cJSON_AddObjectToObject(pos_thread(pos, i), "hang_state");
            const char *sym = cJSON_GetStringValue(cJSON_GetArrayItem(
                locks, i % (cJSON_GetArraySize(locks) ? cJSON_GetArraySize(locks) : 1)));
            cJSON_AddStringToObject(hs, "lock_type", cp_jstr_ne(lw, "type"));
            cJSON_AddStringToObject(hs, "mutex", "0x1000");
            cJSON_AddItemToObject(hs, "mutex_symbol",
                                  sym ? cJSON_CreateString(sym) : cJSON_CreateNull());
        }
    }
}

/* A hang's waiting frame: the function most of its waiting threads wait in (a Python frame for
 * Python threads), in at least as many threads as in the crash. */
static void draft_hang_frame(cJSON *all, cJSON *pos, const cJSON *h)
{
    const cJSON *fr = cJSON_GetObjectItem(h, "frame");
    const char *fn = cp_jstr_ne(fr, "function");
    if (!fn)
        return;
    int py = cJSON_IsTrue(cJSON_GetObjectItem(fr, "python"));
    int n = (int)cp_jnum_or(fr, "threads", 1);
    const char *where = cp_jstr_ne(fr, py ? "file" : "module");
    cJSON *c = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(c, py ? "python_frame" : "frame");
    cJSON_AddStringToObject(o, "function", fn);
    if (where)
        cJSON_AddStringToObject(o, py ? "file" : "module", where);
    cJSON_AddStringToObject(o, "thread", "any");
    cJSON_AddNumberToObject(o, "top", py ? 4 : 24);
    cJSON_AddNumberToObject(o, "min_threads", n < 1 ? 1 : n);
    cJSON_AddItemToArray(all, c);
    for (int i = 0; i < (n < 1 ? 1 : n); i++) {
        cJSON *frs = cJSON_AddArrayToObject(pos_thread(pos, i), py ? "python_frames" : "frames");
        cJSON *one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "function", fn);
        cJSON_AddStringToObject(one, py ? "file" : "module", where ? where : "");
        cJSON_AddItemToArray(frs, one);
    }
}

/* The near-miss case: the positive case with the first condition's fact changed. */
static cJSON *draft_near_miss(const cJSON *pos, const cJSON *all)
{
    cJSON *neg = cJSON_Duplicate(pos, 1);
    const cJSON *first = cJSON_GetArrayItem(all, 0);
    const char *k = first && first->child ? first->child->string : "";
    if (!strcmp(k, "crash_kind"))
        cJSON_ReplaceItemInObject(neg, "crash_kind", cJSON_CreateString("not-this-kind"));
    else if (!strcmp(k, "signal"))
        cJSON_ReplaceItemInObject(
            cJSON_GetObjectItem(cJSON_GetObjectItem(neg, "process"), "signal"), "name",
            cJSON_CreateString("SIGNONE"));
    else if (!strcmp(k, "frame"))
        cJSON_DeleteItemFromObject(neg, "threads");
    else if (!strcmp(k, "xid"))
        cJSON_DeleteItemFromObject(neg, "gpu");
    else if (!strcmp(k, "log_error"))
        cJSON_DeleteItemFromObject(neg, "log");
    return neg;
}

/* The draft's head: id (from the fingerprint), title, category, the TODOs for a person. */
static cJSON *draft_head(long long id, const char *fp, const char *sig, const char *cat)
{
    cJSON *r = cJSON_CreateObject();
    char rid[64], title[512];
    snprintf(rid, sizeof(rid), "team-%.12s", fp && *fp ? fp : "crash");
    for (char *p = rid; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            *p = '-';
    if (!fp || !*fp)
        snprintf(rid, sizeof(rid), "team-crash-%lld", id);
    snprintf(title, sizeof(title), "TODO: name this failure (%s)", sig ? sig : "no signature");
    cJSON_AddStringToObject(r, "id", rid);
    cJSON_AddNumberToObject(r, "version", 1);
    cJSON_AddStringToObject(r, "title", title);
    cJSON_AddStringToObject(r, "category", cat ? cat : "team");
    cJSON_AddNumberToObject(r, "confidence", 0.6);
    cJSON_AddStringToObject(
        r, "diagnosis", "TODO: what went wrong, in a sentence a colleague on call understands.");
    cJSON *acts = cJSON_AddArrayToObject(r, "actions");
    cJSON_AddItemToArray(acts, cJSON_CreateString("TODO: what to do about it"));
    cJSON *refs = cJSON_AddArrayToObject(r, "references");
    char from[128];
    snprintf(from, sizeof(from), "crashpack knowledge base crash %lld", id);
    cJSON_AddItemToArray(refs, cJSON_CreateString(from));
    return r;
}

cJSON *kb_draft_rule(struct kb *kb, long long id, char *err, size_t errlen)
{
    const struct sql_arg a[] = {SQL_INT_ARG(id)};
    char e[512];
    cJSON *rows = sql_rows(
        kb->c, "SELECT fingerprint, signature, facts, top_category, exe FROM crashes WHERE id = ?1",
        a, 1, e, sizeof(e));
    if (!rows) {
        cp_errmsg(err, errlen, "knowledge base: %s", e);
        return NULL;
    }
    const cJSON *row = cJSON_GetArrayItem(rows, 0);
    if (!row) {
        cJSON_Delete(rows);
        cp_errmsg(err, errlen, "no crash %lld in the knowledge base", id);
        return NULL;
    }
    const char *fj = cp_jstr(row, "facts");
    cJSON *facts = fj ? cJSON_Parse(fj) : NULL;
    if (!facts)
        facts = cJSON_CreateObject();
    cJSON *r = draft_head(id, cp_jstr(row, "fingerprint"), cp_jstr(row, "signature"),
                          cp_jstr(row, "top_category"));
    cJSON *all = cJSON_CreateArray(), *pos = cJSON_CreateObject();
    draft_kind(all, pos, facts);
    const cJSON *hang = cJSON_GetObjectItem(facts, "hang");
    if (hang) { /* a hang has no crashed thread: its locks and where its threads wait */
        draft_hang_locks(all, pos, hang);
        draft_hang_frame(all, pos, hang);
    } else {
        draft_frame(all, pos, facts);
    }
    draft_evidence(all, pos, facts);
    if (cJSON_GetArraySize(all) == 0) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "crash_kind", "TODO");
        cJSON_AddItemToArray(all, c);
    }
    cJSON *when = cJSON_AddObjectToObject(r, "when");
    cJSON_AddItemToObject(when, "all", all);
    cJSON *neg = draft_near_miss(pos, all);
    cJSON *tests = cJSON_AddObjectToObject(r, "tests");
    cJSON_AddItemToObject(tests, "positive", pos);
    cJSON_AddItemToObject(tests, "near_miss", neg);
    cJSON_Delete(facts);
    cJSON_Delete(rows);
    return r;
}
