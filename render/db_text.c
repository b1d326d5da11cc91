/* db_text.c - the knowledge base's crash record (a crashpack-db-show/1 document, `crashpack db
 * show`) as text: its identity, how complete the stored record is, how often its fingerprint was
 * seen, every add of it (path, hash, user, outcome), and its diagnoses. Stored strings came from
 * untrusted bundles: they go through cp_text_putn. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

/* At most max bytes of s (0: all) through the terminal policy; NULL prints "-". */
static void put(FILE *out, const char *s, int max)
{
    if (!s) {
        fputc('-', out);
        return;
    }
    cp_text_putn(out, s, max > 0 ? (size_t)max : 0);
}

static void when(double t, char *buf, size_t len)
{
    render_time(t, "%Y-%m-%d %H:%M:%SZ", "?", buf, len);
}

/* Is a source's outcome the one whose analysis the record holds? */
static int stored(const char *outcome)
{
    return !strcmp(outcome, "added") || !strcmp(outcome, "replaced") || !strcmp(outcome, "updated");
}

/* A completeness object ({analysis_complete, core, bundle_complete, members, threads_unwound}). */
static void print_completeness(FILE *out, const cJSON *d)
{
    const cJSON *a = cp_jkey(d, "analysis_complete"), *k = cp_jkey(d, "core"),
                *b = cp_jkey(d, "bundle_complete"), *m = cp_jkey(d, "members"),
                *t = cp_jkey(d, "threads_unwound");
    if (!cJSON_IsBool(a) || !cJSON_IsBool(k) || !cJSON_IsBool(b) || !cJSON_IsNumber(m) ||
        !cJSON_IsNumber(t)) {
        fputs("unknown (stored before completeness scores)", out);
        return;
    }
    int members = (int)m->valuedouble, threads = (int)t->valuedouble;
    fprintf(out, "core analysis %s, core %s, bundle %s, %d intact member%s, %d thread%s unwound",
            cJSON_IsTrue(a) ? "complete" : "incomplete",
            cJSON_IsTrue(k) ? "intact" : "missing or cut short",
            cJSON_IsTrue(b) ? "complete" : "cut short", members, members == 1 ? "" : "s", threads,
            threads == 1 ? "" : "s");
}

/* The lines under one source: hash and size, completeness, reason, error. */
static void print_source_detail(FILE *out, const cJSON *e)
{
    fprintf(out, "%15s", "");
    if (cp_jstr(e, "xxh64"))
        fprintf(out, "xxh64 %s", cp_jstr(e, "xxh64"));
    else
        fputs("no hash", out);
    if (cJSON_IsNumber(cp_jkey(e, "size")))
        fprintf(out, ", %lld bytes", (long long)cp_jnum_or(e, "size", 0));
    fputc('\n', out);
    if (cJSON_IsObject(cp_jkey(e, "completeness"))) {
        fprintf(out, "%15s", "");
        print_completeness(out, cp_jkey(e, "completeness"));
        fputc('\n', out);
    }
    if (cp_jstr(e, "reason")) {
        fprintf(out, "%15s", "");
        put(out, cp_jstr(e, "reason"), 300);
        fputc('\n', out);
    }
    if (cp_jstr(e, "error")) {
        fprintf(out, "%15serror: ", "");
        put(out, cp_jstr(e, "error"), 300);
        fputc('\n', out);
    }
}

/* Every add of the crash, oldest first; the one whose analysis is stored marked '*'. */
static void print_sources(FILE *out, const cJSON *srcs)
{
    int n = cJSON_GetArraySize(srcs);
    fprintf(out, "%-12s%d add%s (* the stored analysis)\n", "sources", n, n == 1 ? "" : "s");
    const cJSON *e;
    cJSON_ArrayForEach(e, srcs)
    {
        char t[32];
        const char *oc = cp_jstr_or(e, "outcome", "?");
        when(cp_jnum_or(e, "added", 0), t, sizeof(t));
        fprintf(out, "  %c %-10s %s  by ", stored(oc) ? '*' : ' ', oc, t);
        if (cJSON_IsNumber(cp_jpath(e, "added_by.uid"))) {
            put(out, cp_jstr_or(cp_jkey(e, "added_by"), "user", "?"), 32);
            fprintf(out, " (uid %lld)", (long long)cp_jnum_or(cp_jkey(e, "added_by"), "uid", 0));
        } else {
            fputs("unknown", out);
        }
        fprintf(out, "  %s ", cp_jstr_or(e, "kind", "bundle"));
        put(out, cp_jstr(e, "path"), 0);
        fputc('\n', out);
        print_source_detail(out, e);
    }
}

static void print_diagnoses(FILE *out, const cJSON *ds)
{
    const cJSON *d, *e;
    int i = 0;
    cJSON_ArrayForEach(d, ds)
    {
        fprintf(out, "%d. ", ++i);
        put(out, cJSON_GetStringValue(cJSON_GetObjectItem(d, "title")), 0);
        fprintf(out, " [");
        put(out, cJSON_GetStringValue(cJSON_GetObjectItem(d, "rule")), 0);
        fprintf(out, "]\n");
        const char *co = cJSON_GetStringValue(cJSON_GetObjectItem(d, "consequence_of"));
        if (co) {
            fputs("   likely a consequence of ", out);
            put(out, co, 0);
            fputc('\n', out);
        }
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "evidence"))
        {
            fputs("   evidence: ", out);
            put(out, cJSON_GetStringValue(e), 0);
            fputc('\n', out);
        }
    }
    if (i == 0)
        fputs("no diagnosis: no known failure pattern matched\n", out);
}

void render_db_show(FILE *out, const cJSON *doc)
{
    static const char *names[] = {"id",     "time",       "host",       "exe",
                                  "signal", "crash_kind", "signature",  "fingerprint",
                                  "job",    "rank",       "local_rank", "bundle"};
    static const char *labels[] = {"id",     "time", "host",       "exe",
                                   "signal", "kind", "signature",  "fingerprint",
                                   "job",    "rank", "local rank", "bundle"};
    render_text_resolution(out, cp_jkey(doc, "resolution")); /* first: what the team found */
    for (int i = 0; i < 12; i++) {
        fprintf(out, "%-12s", labels[i]);
        const cJSON *v = cp_jkey(doc, names[i]);
        if (i == 1) {
            char t[32];
            when(cp_jnum_or(doc, "time", 0), t, sizeof(t));
            fputs(t, out);
        } else if (i == 4) {
            put(out, cp_jstr_at(doc, "signal.name"), 0);
        } else if (i == 11) {
            put(out, cp_jstr_at(doc, "bundle.path"), 0);
        } else if (cJSON_IsNumber(v)) { /* id, rank, local_rank */
            fprintf(out, "%.15g", v->valuedouble);
        } else {
            put(out, cJSON_GetStringValue(v), 0);
        }
        fputc('\n', out);
    }
    fprintf(out, "%-12s", "complete");
    print_completeness(out, cp_jkey(doc, "completeness"));
    fputc('\n', out);
    fprintf(out, "%-12s%d time(s) with this fingerprint\n", "seen",
            (int)cp_jnum_or(doc, "seen", 0));
    print_sources(out, cp_jkey(doc, "sources"));
    print_diagnoses(out, cp_jkey(doc, "diagnoses"));
}
