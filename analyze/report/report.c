/* report.c - see report.h: the pipeline, bundle -> evidence -> native -> hang -> signature ->
 * rules, and the report's bundle-level parts (bundle, process, host, capture, members).
 *
 * Every string from the bundle is untrusted: the report carries it as valid UTF-8 (invalid bytes
 * become U+FFFD); the text formatter (report_text.c) prints it through the terminal policy.
 */
#include "report.h"
#include "bundle.h"
#include "corpus.h"
#include "dcache.h"
#include "errmsg.h"
#include "evidence.h"
#include "hang.h"
#include "identity.h"
#include "jpath.h"
#include "logerr.h"
#include "pyexc.h"
#include "pyframes.h"
#include "report_native.h"
#include "rule.h"
#include "scrub.h"
#include "signature.h"
#include "stacks.h"
#include "utf8.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SMALL_MEMBER_MAX (16u << 20) /* manifest.json, capture.json */
#define THREADS_JSON_MAX (16u << 20)

/* ---- building the report ---- */

static void add_str(cJSON *o, const char *key, const char *s)
{
    if (!s) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    char *c = cp_utf8_clean(s);
    cJSON_AddStringToObject(o, key, c ? c : "");
    free(c);
}

/* Copies a string field of `from` into `to` (absent or non-string: skipped). */
static void copy_str(cJSON *to, const char *tokey, const cJSON *from, const char *fromkey)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, fromkey);
    if (cJSON_IsString(v))
        add_str(to, tokey, v->valuestring);
}

/* Copies a number field; an object {"host": n, ...} counts as its "host" value (tolerance). */
static void copy_num(cJSON *to, const char *tokey, const cJSON *from, const char *fromkey)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, fromkey);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "host");
    if (cJSON_IsNumber(v))
        cJSON_AddNumberToObject(to, tokey, v->valuedouble);
}

static void copy_bool(cJSON *to, const char *tokey, const cJSON *from, const char *fromkey)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, fromkey);
    if (cJSON_IsBool(v))
        cJSON_AddBoolToObject(to, tokey, cJSON_IsTrue(v));
}

/* Reads and parses a small JSON member. NULL with a reason in `why` when absent or unreadable. */
static cJSON *read_json(struct bundle *b, const char *name, char *why, size_t whylen)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = bundle_read_all(b, name, SMALL_MEMBER_MAX, &buf, &len);
    if (rc == BUNDLE_ENOENT) {
        snprintf(why, whylen, "absent");
        return NULL;
    }
    if (rc && rc != BUNDLE_ETRUNC) {
        snprintf(why, whylen, "%s", bundle_error(b));
        free(buf);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!j || !cJSON_IsObject(j)) {
        snprintf(why, whylen, "%s", rc == BUNDLE_ETRUNC ? "truncated" : "not a JSON object");
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static void signal_name(int sig, char *buf, size_t len)
{
    const char *abbr = sig > 0 ? sigabbrev_np(sig) : NULL;
    if (abbr)
        snprintf(buf, len, "SIG%s", abbr);
    else
        snprintf(buf, len, "signal %d", sig);
}

static cJSON *process_part(const cJSON *man)
{
    cJSON *p = cJSON_CreateObject();
    copy_num(p, "pid", man, "pid");
    copy_num(p, "crashed_tid", man, "tid");
    copy_num(p, "ns_tid", man, "ns_tid");
    copy_str(p, "exe", man, "exe");
    copy_str(p, "comm", man, "comm");
    cJSON *args = cJSON_AddArrayToObject(p, "cmdline");
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(man, "cmdline"), *a;
    cJSON_ArrayForEach(a, cl)
    {
        if (cJSON_IsString(a)) {
            char *c = cp_utf8_clean(a->valuestring);
            cJSON_AddItemToArray(args, cJSON_CreateString(c ? c : ""));
            free(c);
        }
    }
    /* signal: {"number": n, "name": "SIGSEGV"} or a bare number */
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(man, "signal");
    const cJSON *num = cJSON_IsObject(sj) ? cJSON_GetObjectItemCaseSensitive(sj, "number") : sj;
    cJSON *sig = cJSON_AddObjectToObject(p, "signal");
    if (cJSON_IsNumber(num) && num->valuedouble >= 1 && num->valuedouble < 1024) {
        int n = (int)num->valuedouble;
        char name[32];
        signal_name(n, name, sizeof(name));
        cJSON_AddNumberToObject(sig, "number", n);
        add_str(sig, "name", name);
    } else {
        cJSON_AddNullToObject(sig, "number");
        cJSON_AddNullToObject(sig, "name");
    }
    copy_num(p, "uid", man, "uid");
    copy_num(p, "gid", man, "gid");
    copy_num(p, "euid", man, "euid");
    copy_num(p, "egid", man, "egid");
    copy_bool(p, "secure", man, "secure");
    copy_str(p, "cwd", man, "cwd");
    copy_str(p, "cgroup", man, "cgroup");
    copy_str(p, "container_id", man, "container_id");
    return p;
}

static cJSON *host_part(const cJSON *man)
{
    cJSON *h = cJSON_CreateObject();
    const cJSON *hj = cJSON_GetObjectItemCaseSensitive(man, "host");
    if (!cJSON_IsObject(hj))
        hj = man; /* tolerance: flat keys */
    copy_str(h, "hostname", hj, "hostname");
    copy_str(h, "kernel", hj, "kernel");
    copy_str(h, "machine", hj, "machine");
    copy_str(h, "boot_id", hj, "boot_id");
    copy_num(h, "time", man, "time");
    const cJSON *iso = cJSON_GetObjectItemCaseSensitive(man, "time_utc");
    if (cJSON_IsString(iso)) {
        add_str(h, "time_utc", iso->valuestring);
    } else {
        double t = cp_jnum_or(man, "time", -1);
        struct tm tm;
        time_t tt = (time_t)t;
        char buf[64];
        if (t >= 0 && t < 1e11 && gmtime_r(&tt, &tm) &&
            strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
            add_str(h, "time_utc", buf);
    }
    copy_str(h, "crashpack_version", man, "crashpack_version");
    return h;
}

/* capture.mode: requested, effective and why, from capture.json (an object, or the older bare
 * string), else the manifest's capture record or its mode. */
static void capture_mode(cJSON *c, const cJSON *man, const cJSON *cap)
{
    cJSON *mode = cJSON_AddObjectToObject(c, "mode");
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(cap, "mode");
    const cJSON *mcap = cJSON_GetObjectItemCaseSensitive(man, "capture");
    if (cJSON_IsObject(mj)) {
        copy_str(mode, "requested", mj, "requested");
        copy_str(mode, "effective", mj, "effective");
        copy_str(mode, "reason", mj, "reason");
    } else if (cJSON_IsString(mj)) {
        add_str(mode, "effective", mj->valuestring);
    } else if (cJSON_IsObject(mcap)) {
        copy_str(mode, "effective", mcap, "mode");
        copy_str(mode, "reason", mcap, "mode_reason");
    } else {
        copy_str(mode, "effective", man, "mode");
    }
}

/* capture.core: the core stream as capture.json records it (its truncation as the salvage record
 * says, when it says truncated), and the core member as stored in this file. */
static void capture_core(cJSON *c, struct bundle *b, const cJSON *cap, const cJSON *salv)
{
    cJSON *core = cJSON_AddObjectToObject(c, "core");
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(cap, "core");
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(salv, "core");
    copy_num(core, "declared_size", cj, "declared_size");
    copy_num(core, "stream_bytes", cj, "stream_bytes");
    copy_num(core, "stored_bytes", cj, "stored_bytes");
    copy_num(core, "compressed_bytes", cj, "compressed_bytes");
    copy_num(core, "frames", cj, "frames");
    copy_str(core, "stream_xxh64", cj, "stream_xxh64");
    copy_str(core, "member_xxh64", cj, "member_xxh64");
    copy_str(core, "error", cj, "error");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(cj, "truncated");
    const cJSON *trr = cJSON_GetObjectItemCaseSensitive(cj, "truncation_reason");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sj, "truncated"))) {
        tr = cJSON_GetObjectItemCaseSensitive(sj, "truncated");
        trr = cJSON_GetObjectItemCaseSensitive(sj, "truncation_reason");
    }
    if (cJSON_IsBool(tr))
        cJSON_AddBoolToObject(core, "truncated", cJSON_IsTrue(tr));
    if (cJSON_IsString(trr))
        add_str(core, "truncation_reason", trr->valuestring);
    /* the core member as stored in this file */
    const struct bundle_member *m = bundle_find(b, "core");
    if (m) {
        cJSON_AddNumberToObject(core, "member_size", (double)m->size);
        cJSON_AddNumberToObject(core, "member_compressed", (double)m->compressed);
        /* data bytes present per compressed byte (a cut member: of what is there) */
        if (m->compressed && m->available)
            cJSON_AddNumberToObject(
                core, "ratio", (double)(long long)((double)m->available / m->compressed * 10) / 10);
        cJSON_AddBoolToObject(core, "member_truncated", m->truncated);
        cJSON_AddNumberToObject(core, "member_available", (double)m->available);
    }
}

/* capture.failed_steps (the steps of capture.json not ok) and capture.steps (how many). */
static void capture_steps(cJSON *c, const cJSON *cap)
{
    cJSON *bad = cJSON_AddArrayToObject(c, "failed_steps");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(cap, "steps"), *s;
    int nsteps = 0;
    cJSON_ArrayForEach(s, steps)
    {
        nsteps++;
        const char *st = cp_jstr_or(s, "status", NULL);
        if (!cJSON_IsObject(s) || (st && !strcmp(st, "ok")))
            continue;
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", cp_jstr_or(s, "name", "?"));
        add_str(o, "status", st ? st : "?");
        copy_str(o, "reason", s, "reason");
        copy_num(o, "ms", s, "ms");
        cJSON_AddItemToArray(bad, o);
    }
    cJSON_AddNumberToObject(c, "steps", nsteps);
}

/* capture{}: from capture.json (and its salvage record), plus what the member table says. */
static cJSON *capture_part(struct bundle *b, const cJSON *man, const cJSON *cap, const char *capwhy,
                           const cJSON *salv)
{
    cJSON *c = cJSON_CreateObject();
    const char *status = cp_jstr_or(cap, "status", NULL);
    if (!status && salv)
        status = cp_jstr_or(salv, "status", NULL);
    add_str(c, "status", status ? status : bundle_complete(b) ? "unknown" : "partial");
    if (!cap)
        add_str(c, "capture_json_error", capwhy);
    capture_mode(c, man, cap);
    capture_core(c, b, cap, salv);
    capture_steps(c, cap);
    copy_num(c, "total_ms", cap, "total_ms");
    if (salv) {
        cJSON *so = cJSON_AddObjectToObject(c, "salvage");
        copy_str(so, "from", salv, "from");
        copy_num(so, "at", salv, "at");
        copy_str(so, "note", salv, "note");
        copy_str(so, "cut_member", salv, "cut_member");
        copy_num(so, "padded_bytes", salv, "padded_bytes");
    }
    return c;
}

static cJSON *members_part(struct bundle *b)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", m->name);
        cJSON_AddNumberToObject(o, "size", (double)m->size);
        cJSON_AddNumberToObject(o, "compressed_size", (double)m->compressed);
        cJSON_AddNumberToObject(o, "frames", (double)m->nframes);
        cJSON_AddBoolToObject(o, "truncated", m->truncated);
        cJSON_AddNumberToObject(o, "available", (double)m->available);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* The skeleton: what the bundle itself says, and every contract field the stages fill later. */
static cJSON *bundle_part(struct bundle *b, const char *path)
{
    char manwhy[256] = "", capwhy[256] = "";
    cJSON *man = read_json(b, "manifest.json", manwhy, sizeof(manwhy));
    cJSON *cap = read_json(b, "capture.json", capwhy, sizeof(capwhy));
    cJSON *salv = NULL;
    if (cap && cJSON_IsObject(cJSON_GetObjectItem(cap, "salvage")))
        salv = cJSON_Duplicate(cJSON_GetObjectItem(cap, "salvage"), 1);

    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "format", REPORT_FORMAT);
    cJSON *bj = cJSON_AddObjectToObject(r, "bundle");
    add_str(bj, "path", path);
    cJSON_AddBoolToObject(bj, "complete", bundle_complete(b));
    if (bundle_complete(b))
        cJSON_AddNullToObject(bj, "partial_reason");
    else
        add_str(bj, "partial_reason", bundle_reason(b));
    cJSON_AddNumberToObject(bj, "file_size", (double)bundle_file_size(b));
    cJSON_AddNumberToObject(bj, "tar_size", (double)bundle_tar_size(b));
    if (man)
        copy_str(bj, "manifest_format", man, "format");
    else
        add_str(bj, "manifest_error", manwhy);

    cJSON_AddItemToObject(r, "process", process_part(man));
    pyexc_add(r, b); /* exception.json: report `exception` */
    cJSON *exc = (cJSON *)cp_jkey(r, "exception");
    if (cJSON_IsObject(exc))
        cp_json_set(exc, "source", cJSON_CreateString("exception.json"));
    pyexc_death(r, man, b); /* process.death; signal and crashed_tid for deaths without a core */
    report_identity(r, man, b); /* exe, cmdline, comm from what the capture path recorded */
    report_output(r, b);        /* output{}: its last lines; a traceback in it as `exception` */
    cJSON_AddItemToObject(r, "host", host_part(man));
    cJSON_AddItemToObject(r, "capture", capture_part(b, man, cap, capwhy, salv));
    cJSON_AddItemToObject(r, "members", members_part(b));

    /* contract fields the analyzer fills later */
    cJSON_AddItemToObject(r, "threads", cJSON_CreateArray());
    cJSON_AddNullToObject(r, "signature");
    cJSON_AddNullToObject(r, "fingerprint");
    cJSON *gpu = cJSON_AddObjectToObject(r, "gpu");
    cJSON_AddItemToObject(gpu, "xid", cJSON_CreateArray());
    cJSON_AddNullToObject(gpu, "nvidia_smi");
    cJSON_AddStringToObject(gpu, "nvidia_smi_error", "not analyzed");
    cJSON *ck = cJSON_AddObjectToObject(r, "checkpoint");
    cJSON_AddNullToObject(ck, "path");
    cJSON_AddNullToObject(ck, "valid");
    cJSON_AddStringToObject(ck, "reason", "not analyzed");
    cJSON *log = cJSON_AddObjectToObject(r, "log");
    cJSON_AddItemToObject(log, "errors", cJSON_CreateArray());
    cJSON_AddItemToObject(r, "diagnoses", cJSON_CreateArray());

    cJSON_Delete(man);
    cJSON_Delete(cap);
    cJSON_Delete(salv);
    return r;
}

/* Collects the native analysis started in report_build and merges it into r. Returns 1 when it
 * did not complete. */
static int native_part(struct bundle *b, cJSON *r, int no_stacks, struct native_job *nj)
{
    if (!bundle_find(b, "core")) {
        native_cancel(nj);
        /* a cut bundle has lost its later members: it is not a metadata-only capture */
        char why[1024];
        size_t nm = bundle_member_count(b);
        const struct bundle_member *last = nm ? bundle_member(b, nm - 1) : NULL;
        if (!bundle_complete(b))
            cp_errmsg(why, sizeof(why),
                      "no core member in what is left of this bundle: it is truncated (%s); the "
                      "last member found is %s (%s, %llu of %llu bytes)",
                      bundle_reason(b), last ? last->name : "none",
                      last && last->truncated ? "cut" : "whole",
                      last ? (unsigned long long)last->available : 0ull,
                      last ? (unsigned long long)last->size : 0ull);
        else
            snprintf(why, sizeof(why), "no core in this bundle (a metadata-only capture)");
        report_native_skipped(r, why);
        stacks_annotate(r, NULL);
        return 0;
    }
    cJSON *threads = NULL; /* read while the child still works */
    if (bundle_find(b, "proc/threads.json")) {
        char *buf = NULL;
        size_t len = 0;
        int rc = bundle_read_all(b, "proc/threads.json", THREADS_JSON_MAX, &buf, &len);
        if (rc == BUNDLE_OK)
            threads = cJSON_ParseWithLength(buf, len);
        free(buf);
    }
    int failed = 0;
    cJSON *nat = nj ? native_finish(nj, &failed) : NULL;
    cJSON *sinfo = NULL; /* stacks.json: the crashed host's analysis, used where binaries lack */
    if (nat)
        nat = stacks_apply(b, nat, no_stacks, &failed, &sinfo);
    if (!nat) {
        report_native_skipped(r, "out of memory");
        cJSON_Delete(sinfo);
        cJSON_Delete(threads);
        return 1;
    }
    report_native_merge(r, nat, cJSON_IsArray(threads) ? threads : NULL);
    stacks_annotate(r, sinfo);
    cJSON_Delete(threads);
    return failed;
}


/* --timeout bounds the whole analysis, not only the native child: the stages after it are linear
 * in what the caps let through, and the clock is read before each one. Their deadline is the
 * limit and a quarter more (at least 1 s), so that a child stopped at the limit still leaves a
 * partial report with its hang states, signature and diagnoses. Past it the rest are skipped and
 * the report is partial, saying which stage was not reached. */
struct stage_clock {
    double deadline; /* CLOCK_MONOTONIC seconds */
    unsigned limit_s;
    long test_sleep_ms; /* CRASHPACK_TEST_STAGE_SLEEP_MS: each stage starts that much later (how
                         * the tests make a parent stage run past --timeout) */
    int expired;        /* a stage was skipped */
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1 when the stage named may run; 0 past the deadline (analysis.complete false, analysis.error
 * and st->native_failed set, once). */
static int stage_ok(struct stage_clock *c, cJSON *r, const char *stage, struct report_status *st)
{
    if (c->test_sleep_ms > 0) {
        struct timespec ts = {c->test_sleep_ms / 1000, (c->test_sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (c->expired)
        return 0;
    if (mono_now() < c->deadline)
        return 1;
    c->expired = 1;
    {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "the analysis ran past its time limit (%u s, --timeout, and %u s for the stages "
                 "after the core's) before the %s stage; it and the stages after it were skipped",
                 c->limit_s, c->limit_s / 4 ? c->limit_s / 4 : 1, stage);
        cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "analysis");
        if (!cJSON_IsObject(a)) {
            a = cJSON_CreateObject();
            cp_json_set(r, "analysis", a);
        }
        cp_json_set(a, "complete", cJSON_CreateFalse());
        const char *old = cp_jstr(a, "error");
        if (old) { /* keep the native analysis's own reason first */
            char both[1024];
            snprintf(both, sizeof(both), "%s; %s", old, msg);
            cp_json_set(a, "error", cJSON_CreateString(both));
        } else {
            cp_json_set(a, "error", cJSON_CreateString(msg));
        }
        cp_json_set(a, "timed_out_stage", cJSON_CreateString(stage));
        st->native_failed = 1;
    }
    return 0;
}

/* What the core lacked and its log tails say (logerr_fill_cause): an exception's what(), an abort
 * message. The tails are read again here: evidence_add ran before the core was analyzed. */
static void cause_from_logs(struct bundle *b, cJSON *r)
{
    const cJSON *cause = cp_jkey(r, "cause");
    const cJSON *ex = cp_jkey(cause, "exception");
    int want_what = cp_jstr(ex, "type") && !cp_jstr(ex, "what");
    int want_abort = cJSON_IsObject(cause) && !cp_jstr(cause, "abort_message") &&
                     cp_jstr_at(r, "process.signal.name") &&
                     !strcmp(cp_jstr_at(r, "process.signal.name"), "SIGABRT");
    if (!want_what && !want_abort)
        return;
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        size_t nl = strlen(m->name);
        if (strncmp(m->name, "logs/", 5) || nl < 10 || strcmp(m->name + nl - 5, ".tail") || !m->size)
            continue;
        char *buf = NULL;
        size_t len = 0;
        int rc = bundle_read_all(b, m->name, 16u << 20, &buf, &len);
        if ((rc == BUNDLE_OK || rc == BUNDLE_ETRUNC) && buf)
            logerr_fill_cause(r, buf, len, m->name);
        free(buf);
    }
}

/* The similar stage: the nearest known cases (analyze/similar/) for the last 256 KiB of the
 * output member the report read (output.member) and the log errors. */
static void similar_stage(struct bundle *b, cJSON *r)
{
    const char *member = cp_jstr_at(r, "output.member");
    char *out = NULL;
    size_t len = 0;
    int rc = member ? bundle_read_all(b, member, 16u << 20, &out, &len) : BUNDLE_ENOENT;
    const char *text = NULL;
    if ((rc == BUNDLE_OK || rc == BUNDLE_ETRUNC) && out) {
        size_t keep = 256u << 10;
        text = len > keep ? out + len - keep : out;
        out[len] = 0;
    }
    similar_report(r, text, NULL);
    free(out);
}

/* The stages after the bundle's own parts, in order. Returns 1 when the core analysis did not
 * complete or a stage ran past the deadline. nj is consumed. */
static int analysis_stages(struct bundle *b, cJSON *r, const struct report_opts *o,
                           struct native_job *nj, struct report_status *st,
                           struct stage_clock *clk)
{
    char everr[1024] = "";
    if (evidence_add(r, b, everr, sizeof(everr)))
        cJSON_AddStringToObject(r, "evidence_error", everr);
    /* the rule base, which the last step needs, and the signature's skip and prefix lists: loaded
     * while the child still works */
    char derr[512] = "", lerr[512] = "", serr[512] = "";
    struct rulebase *rb = diagnose_open(o->kb, derr, sizeof(derr));
    struct siglists *L = siglists_load(NULL, lerr, sizeof(lerr));
    st->native_failed = native_part(b, r, o->no_stacks, nj);
    pyexc_death_finish(r); /* a live snapshot's core: the raising thread, no signal */
    pyframes_finish(r);    /* the hook's frames marked; the frames at the raise */
    report_no_placeholders(r); /* no signal 0, no crashed tid -1 */
    cause_from_logs(b, r); /* what() and abort messages the core lacked, from the log tails */
    if (stage_ok(clk, r, "hang", st))
        hang_analyze(b, r); /* after the frames: threads[].hang_state, hang.deadlocks */
    /* after hang: a snap's kind is "hang"; failures in signature_info.error */
    if (stage_ok(clk, r, "signature", st))
        signature_compute(r, L, lerr, o->explain, serr, sizeof(serr));
    siglists_free(L);
    /* last step: the rule base reads every field the analysis filled in */
    if (stage_ok(clk, r, "rules", st)) {
        if (rb)
            report_history(r, o->kb); /* gpu.history, which the rules read */
        if (diagnose_with(r, rb, derr, sizeof(derr)) < 0)
            snprintf(st->diagnose_error, sizeof(st->diagnose_error), "%s", derr);
        similar_stage(b, r);
    } else {
        rulebase_close(rb);
        char why[] = "not run: the analysis ran past its time limit (--timeout)";
        diagnose_with(r, NULL, why, sizeof(why));
    }
    return st->native_failed;
}

/* members[].used: whether the analysis read the member whole and took it in (the core: whether
 * its analysis completed). A member nobody reads - padding added to a bundle - is not used, so
 * it cannot make a forged copy of a crash look more complete to the knowledge base. */
static void members_used(struct bundle *b, cJSON *r)
{
    const cJSON *members = cJSON_GetObjectItemCaseSensitive(r, "members");
    int core_ok = cJSON_IsTrue(cp_jpath(r, "analysis.complete"));
    for (size_t i = 0; i < bundle_member_count(b); i++) {
        const struct bundle_member *m = bundle_member(b, i);
        cJSON *e = cJSON_GetArrayItem(members, (int)i);
        if (!e)
            break;
        int used = !m->truncated && (strcmp(m->name, "core") ? m->read_whole : core_ok);
        cJSON_AddBoolToObject(e, "used", used);
    }
}

int report_rediagnose(cJSON *r, struct kb *kb, char *err, size_t errlen)
{
    struct rulebase *rb = diagnose_open(kb, err, errlen);
    if (rb)
        report_history(r, kb);
    int rc = diagnose_with(r, rb, err, errlen);
    if (!cp_jkey(r, "similar_info")) /* an older report: from its last lines and log errors */
        similar_report(r, NULL, NULL);
    return rc;
}

/* Every string of the report through the scrubber (common/scrub.h), in place (same length):
 * a bundle from an older crashpack, or text the analysis read from the core (a thread's name, a
 * Python frame's file), shows no secret the capture would have masked. */
static void scrub_strings(cJSON *j)
{
    for (; j; j = j->next) {
        if (cJSON_IsString(j) && j->valuestring)
            cp_mask_secrets(j->valuestring);
        scrub_strings(j->child);
    }
}

/* A bundle cut before its manifest is whole has no crash identity: nothing to report (1, with
 * st->error naming the path and where it was cut), else 0. */
static int cut_in_manifest(const struct bundle *b, const char *path, struct report_status *st)
{
    const struct bundle_member *m = bundle_find(b, "manifest.json");
    if (bundle_complete(b) || (m && !m->truncated && m->available == m->size))
        return 0;
    cp_errmsg(st->error, sizeof(st->error),
              "truncated bundle: %s (%llu bytes, cut %s manifest.json: no crash identity to "
              "report)",
              path, (unsigned long long)bundle_file_size(b), m ? "inside" : "before");
    return 1;
}

cJSON *report_build(const char *path, const struct report_opts *o, struct report_status *st)
{
    memset(st, 0, sizeof(*st));
    struct native_opts nopt = o->native;
    char cache_dir[4096];
    if (o->no_cache)
        nopt.unwind.cache_dir = NULL;
    else if (!nopt.unwind.cache_dir && !dcache_default_dir(cache_dir, sizeof(cache_dir)))
        nopt.unwind.cache_dir = cache_dir;
    /* the child that unwinds starts first and opens the bundle itself: forked before this process
     * has touched the bundle, it copies few pages on write. It works while this process decodes
     * the evidence and loads the rule base. */
    struct stage_clock clk = {.limit_s = nopt.wall_s ? nopt.wall_s : NATIVE_DEFAULT_WALL_S};
    clk.deadline = mono_now() + clk.limit_s + (clk.limit_s / 4 ? clk.limit_s / 4 : 1);
    const char *ts = getenv("CRASHPACK_TEST_STAGE_SLEEP_MS");
    clk.test_sleep_ms = ts && *ts ? strtol(ts, NULL, 10) : 0;
    struct native_job *nj = !o->members_only ? native_start_path(path, &nopt) : NULL;
    struct bundle *b = NULL;
    if (bundle_open(path, &b, st->error, sizeof(st->error)) || cut_in_manifest(b, path, st)) {
        native_cancel(nj);
        bundle_close(b);
        return NULL;
    }
    cJSON *r = bundle_part(b, path);
    if (!r) {
        native_cancel(nj);
        bundle_close(b);
        cp_errmsg(st->error, sizeof(st->error), "%s: out of memory", path);
        return NULL;
    }
    if (!o->members_only) {
        st->native_failed = analysis_stages(b, r, o, nj, st, &clk);
        members_used(b, r);
    }
    st->partial = !bundle_complete(b) || st->native_failed;
    bundle_close(b);
    scrub_strings(r);
    return r;
}
