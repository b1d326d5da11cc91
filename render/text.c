/* text.c - the text form of a crashpack-report/1 object (`crashpack analyze` without --json):
 * one section per stage, each printed from the report alone, in the order below. This file holds
 * the bundle-level sections (bundle, process, capture, core, members); the stages' sections are in
 * text_*.c. Every string goes through cp_text_put. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_members(FILE *out, const cJSON *r)
{
    const cJSON *m;
    size_t w = 4;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "members"))
    {
        size_t l = strlen(cp_jstr_at(m, "name") ? cp_jstr_at(m, "name") : "");
        if (l > w)
            w = l < 40 ? l : 40;
    }
    fprintf(out, "  %-*s %12s %12s %7s\n", (int)w, "name", "size", "compressed", "frames");
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "members"))
    {
        const char *name = cp_jstr_at(m, "name");
        double size = 0, comp = 0, frames = 0, avail = 0;
        cp_jnum_at(m, "size", &size);
        cp_jnum_at(m, "compressed_size", &comp);
        cp_jnum_at(m, "frames", &frames);
        cp_jnum_at(m, "available", &avail);
        char a[32], c[32], v[32];
        fputs("  ", out);
        cp_text_put(out, name ? name : "?");
        size_t l = name ? strlen(name) : 1;
        fprintf(out, "%*s %12s %12s %7.0f", (int)(l < w ? w - l : 0), "",
                render_human(size, a, sizeof(a)), render_human(comp, c, sizeof(c)), frames);
        if (cJSON_IsTrue(cp_jpath(m, "truncated")))
            fprintf(out, "  TRUNCATED: %s available", render_human(avail, v, sizeof(v)));
        fputc('\n', out);
    }
}

/* The bundle's problems (cut short, no manifest), whatever the verbosity: they qualify all the
 * rest. */
static void print_bundle_problems(FILE *out, const cJSON *r)
{
    const char *s;
    if (!cJSON_IsTrue(cp_jpath(r, "bundle.complete"))) {
        render_label(out, "PARTIAL");
        cp_text_put(out, cp_jstr_at(r, "bundle.partial_reason")
                             ? cp_jstr_at(r, "bundle.partial_reason")
                             : "");
        fputc('\n', out);
    }
    if ((s = cp_jstr_at(r, "bundle.manifest_error"))) {
        render_label(out, "manifest");
        fputs("unreadable: ", out);
        cp_text_put(out, s);
        fputc('\n', out);
    }
}

/* The bundle line, and what is wrong with it (cut short, no manifest). */
static void print_bundle(FILE *out, const cJSON *r)
{
    double v = 0;
    char a[32];
    render_label(out, "bundle");
    cp_text_put(out, cp_jstr_at(r, "bundle.path") ? cp_jstr_at(r, "bundle.path") : "?");
    cp_jnum_at(r, "bundle.file_size", &v);
    fprintf(out, " (%s, %d members)\n", render_human(v, a, sizeof(a)),
            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "members")));
    print_bundle_problems(out, r);
}

/* The command line, its arguments quoted where a shell would need it, cut at about max bytes
 * with "..." (0: never). */
static void print_cmdline(FILE *out, const cJSON *r, size_t max)
{
    const cJSON *args = cp_jpath(r, "process.cmdline"), *arg;
    if (cJSON_GetArraySize(args) <= 0)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    int first = 1;
    cJSON_ArrayForEach(arg, args)
    {
        const char *a = cJSON_GetStringValue(arg) ? cJSON_GetStringValue(arg) : "";
        int quote = !a[0] || strpbrk(a, " \t'\"\\$`") != NULL;
        fprintf(m, "%s%s%s%s", first ? "" : " ", quote ? "'" : "", a, quote ? "'" : "");
        first = 0;
    }
    if (fclose(m) == 0 && buf) {
        render_label(out, "cmdline");
        render_put_cut(out, buf, max);
        fputc('\n', out);
    }
    free(buf);
}

/* The crashed process: pid, tid and signal, how it died, exe, command line. */
static void print_process(FILE *out, const cJSON *r, int verbose)
{
    double v = 0;
    const char *s;

    render_label(out, "process");
    if (cp_jnum_at(r, "process.pid", &v))
        fprintf(out, "pid %.0f", v);
    else
        fputs("pid unknown", out);
    if (!cp_jstr_ne_at(r, "process.exe") && (s = cp_jstr_ne_at(r, "process.comm"))) {
        fputs(" (", out); /* the name: the executable is unknown (an OOM kill's, a report's) */
        cp_text_put(out, s);
        fputc(')', out);
    }
    if (cp_jnum_at(r, "process.crashed_tid", &v))
        fprintf(out, ", crashed tid %.0f", v);
    if (cp_jnum_at(r, "process.signal.number", &v)) {
        fprintf(out, ", signal %.0f (", v);
        cp_text_put(out, cp_jstr_at(r, "process.signal.name") ? cp_jstr_at(r, "process.signal.name")
                                                              : "?");
        fputc(')', out);
    }
    fputc('\n', out);
    render_text_death(out, r);
    if ((s = cp_jstr_ne_at(r, "process.exe"))) {
        render_label(out, "exe");
        cp_text_put(out, s);
        fputc('\n', out);
    }
    print_cmdline(out, r, verbose ? 0 : 240);
}

/* Who ran it, where and when (the user with --verbose only). */
static void print_where(FILE *out, const cJSON *r, int verbose)
{
    double v = 0, v2 = 0;
    const char *s;

    if (verbose && cp_jnum_at(r, "process.uid", &v)) {
        render_label(out, "user");
        fprintf(out, "uid %.0f", v);
        if (cp_jnum_at(r, "process.gid", &v2))
            fprintf(out, ", gid %.0f", v2);
        if (cJSON_IsTrue(cp_jpath(r, "process.secure")))
            fputs(" (secure: setuid/capabilities or not dumpable)", out);
        fputc('\n', out);
    }
    if ((s = cp_jstr_at(r, "host.hostname")) || cp_jstr_at(r, "host.kernel")) {
        render_label(out, "host");
        cp_text_put(out, s ? s : "?");
        if ((s = cp_jstr_at(r, "host.kernel"))) {
            fputs(", kernel ", out);
            cp_text_put(out, s);
        }
        fputc('\n', out);
    }
    if ((s = cp_jstr_at(r, "host.time_utc")) || cp_jnum_at(r, "host.time", &v)) {
        render_label(out, "time");
        if (s)
            cp_text_put(out, s);
        if (cp_jnum_at(r, "host.time", &v))
            fprintf(out, "%s%.0f%s", s ? " (" : "", v, s ? ")" : "");
        fputc('\n', out);
    }
}

/* How the capture went: status, mode, capture.json's problem, the salvage record. */
static void print_capture(FILE *out, const cJSON *r)
{
    const char *s;

    render_label(out, "capture");
    cp_text_put(out, cp_jstr_at(r, "capture.status") ? cp_jstr_at(r, "capture.status") : "?");
    if ((s = cp_jstr_at(r, "capture.mode.effective"))) {
        fputs(", mode ", out);
        cp_text_put(out, s);
        const char *req = cp_jstr_at(r, "capture.mode.requested");
        if (req && strcmp(req, s)) {
            fputs(" (requested ", out);
            cp_text_put(out, req);
            fputc(')', out);
        }
        if ((s = cp_jstr_at(r, "capture.mode.reason"))) {
            fputs(": ", out);
            cp_text_put(out, s);
        }
    }
    if ((s = cp_jstr_at(r, "capture.capture_json_error"))) {
        fputs("; capture.json ", out);
        cp_text_put(out, s);
    }
    fputc('\n', out);
    if ((s = cp_jstr_at(r, "capture.salvage.note"))) {
        render_label(out, "salvaged");
        cp_text_put(out, s);
        if ((s = cp_jstr_at(r, "capture.salvage.cut_member"))) {
            fputs("; cut member ", out);
            cp_text_put(out, s);
        }
        fputc('\n', out);
    }
}

/* The core as declared, stored and compressed, and whether it was cut. */
static void print_core(FILE *out, const cJSON *r)
{
    char a[32], c2[32], c3[32];
    double v = 0, v2 = 0;
    const char *s;
    const cJSON *core = cp_jpath(r, "capture.core");
    if (core && cJSON_GetArraySize(core) > 0) {
        render_label(out, "core");
        int any = 0;
        if (cp_jnum_at(core, "declared_size", &v)) {
            fprintf(out, "%s declared", render_human(v, a, sizeof(a)));
            any = 1;
        } else if (cp_jnum_at(core, "member_size", &v)) {
            fprintf(out, "%s", render_human(v, a, sizeof(a)));
            any = 1;
        }
        if (cp_jnum_at(core, "stored_bytes", &v)) {
            fprintf(out, "%s%s stored", any ? ", " : "", render_human(v, c2, sizeof(c2)));
            any = 1;
        }
        if (cp_jnum_at(core, "member_compressed", &v)) {
            fprintf(out, "%s%s compressed", any ? ", " : "", render_human(v, c3, sizeof(c3)));
            if (cp_jnum_at(core, "ratio", &v2))
                fprintf(out, " (%.1fx)", v2);
            any = 1;
        }
        if (cJSON_IsTrue(cp_jpath(core, "truncated"))) {
            fprintf(out, "%sTRUNCATED", any ? "; " : "");
            if ((s = cp_jstr_at(core, "truncation_reason"))) {
                fputs(": ", out);
                cp_text_put(out, s);
            }
            any = 1;
        } else if (cJSON_IsFalse(cp_jpath(core, "truncated"))) {
            fprintf(out, "%snot truncated", any ? "; " : "");
            any = 1;
        }
        if (cJSON_IsTrue(cp_jpath(core, "member_truncated")) &&
            cp_jnum_at(core, "member_available", &v)) {
            fprintf(out, "%scut short in this file: %s available", any ? "; " : "",
                    render_human(v, a, sizeof(a)));
            any = 1;
        }
        if ((s = cp_jstr_at(core, "error"))) {
            fprintf(out, "%serror: ", any ? "; " : "");
            cp_text_put(out, s);
        }
        fputc('\n', out);
    }
}

/* The capture steps that did not succeed. */
static void print_failed_steps(FILE *out, const cJSON *r)
{
    const char *s;
    const cJSON *steps = cp_jpath(r, "capture.failed_steps"), *st;
    int first = 1;
    cJSON_ArrayForEach(st, steps)
    {
        render_label(out, first ? "not ok" : "");
        first = 0;
        cp_text_put(out, cp_jstr_at(st, "name") ? cp_jstr_at(st, "name") : "?");
        fputs(": ", out);
        cp_text_put(out, cp_jstr_at(st, "status") ? cp_jstr_at(st, "status") : "?");
        if ((s = cp_jstr_at(st, "reason"))) {
            fputs(" (", out);
            cp_text_put(out, s);
            fputc(')', out);
        }
        fputc('\n', out);
    }
}


/* The capture steps that did not succeed, briefly: those absent or skipped (no such file, no
 * driver, nothing to keep) counted, the ones that failed named. */
static void print_steps_brief(FILE *out, const cJSON *r)
{
    const cJSON *st;
    int absent = 0;
    cJSON_ArrayForEach(st, cp_jpath(r, "capture.failed_steps"))
    {
        const char *s = cp_jstr(st, "status");
        if (s && (!strcmp(s, "absent") || !strcmp(s, "skipped"))) {
            absent++;
            continue;
        }
        render_label(out, "not ok");
        cp_text_put(out, cp_jstr(st, "name") ? cp_jstr(st, "name") : "?");
        fputs(": ", out);
        cp_text_put(out, s ? s : "?");
        if ((s = cp_jstr(st, "reason"))) {
            fputs(" (", out);
            render_put_cut(out, s, 160);
            fputc(')', out);
        }
        fputc('\n', out);
    }
    if (absent)
        fprintf(out,
                "%-10s%d piece%s of evidence absent or skipped on the crashed host: "
                "--verbose lists them\n",
                "absent", absent, absent == 1 ? "" : "s");
}

void render_text(FILE *out, const cJSON *r, unsigned flags)
{
    int verbose = (flags & RENDER_TEXT_VERBOSE) != 0;
    if (flags & RENDER_TEXT_MEMBERS_ONLY) {
        print_members(out, r);
        render_text_hang(out, r);
        return;
    }
    /* the answer: what died and how, the top diagnosis, the exception or the crashing frame,
     * the deadlock cycle, the signature; before all, what the team found this group to be */
    render_text_resolution(out, cp_jkey(r, "resolution"));
    if (verbose)
        print_bundle(out, r);
    else
        print_bundle_problems(out, r);
    print_process(out, r, verbose);
    render_text_cause(out, r);
    render_text_top_diagnosis(out, r);
    render_text_similar(out, r);
    render_text_exception_head(out, r);
    render_text_crash_frame(out, r);
    render_text_deadlocks(out, r);
    render_text_signature(out, r);
    print_where(out, r, verbose);
    /* then the threads, the rest of the evidence, the other diagnoses */
    fputc('\n', out);
    render_text_exception(out, r);
    render_text_native(out, r);
    render_text_evidence(out, r, verbose);
    if (verbose) {
        fputc('\n', out);
        print_capture(out, r);
        print_core(out, r);
        print_failed_steps(out, r);
        fputs("members\n", out);
        print_members(out, r);
    } else {
        print_steps_brief(out, r);
    }
    render_text_hang(out, r);
    render_text_more_diagnoses(out, r);
}

void render_notes(FILE *err, const char *prog, const cJSON *r, const char *diagnose_error,
                  int native_failed, int json)
{
    const char *w = cp_jstr_at(r, "analysis.stacks_json.warning");
    if (json && w) { /* the text report prints it anyway */
        fprintf(err, "%s: warning: ", prog);
        cp_text_put(err, w);
        fputc('\n', err);
    }
    const char *xe = cp_jstr_at(r, "exception_error");
    if (json && xe) { /* the text report prints it anyway */
        fprintf(err, "%s: warning: ", prog);
        cp_text_put(err, xe);
        fputc('\n', err);
    }
    if (diagnose_error && diagnose_error[0]) {
        fprintf(err, "%s: diagnosis: ", prog);
        cp_text_put(err, diagnose_error);
        fputc('\n', err);
    }
    if (native_failed) {
        const char *e = cp_jstr_at(r, "analysis.error");
        fprintf(err, "%s: the core analysis is incomplete: ", prog);
        cp_text_put(err, e ? e : "unknown error");
        fputc('\n', err);
    }
}
