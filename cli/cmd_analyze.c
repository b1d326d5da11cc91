/* cmd_analyze.c - `crashpack analyze BUNDLE [--json] [--members]`.
 *
 * For now a listing: what the bundle says about the crash (manifest.json), how the capture went
 * (capture.json, with its salvage record), and its members. Text and JSON are printed from one report object
 * (crashpack-report/1), so they never disagree; the report already has every field of the JSON
 * contract (threads, gpu, checkpoint, log, diagnoses) with empty values until the analyzer fills
 * them.
 *
 * Every string from the bundle is untrusted: the JSON report carries it as valid UTF-8 (invalid
 * bytes become U+FFFD), the text output escapes control characters so a bundle cannot drive the
 * terminal.
 *
 * Exit: 0 complete bundle, 1 partial or unreadable bundle (what could be read is still printed),
 * 2 usage error, 3 no such bundle file (exitcodes.h).
 */
#include "cmdopt.h"
#include "utf8.h"
#include "jpath.h"
#include "bundle.h"
#include "commands.h"
#include "evidence.h"
#include "native.h"
#include "dcache.h"
#include "report_native.h"
#include "signature.h"
#include "signature_text.h"
#include "rule.h"
#include "hang.h"
#include "stacks.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REPORT_FORMAT "crashpack-report/1"
#define SMALL_MEMBER_MAX (16u << 20) /* manifest.json, capture.json */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: crashpack analyze BUNDLE [--json] [--members] [options]\n"
            "\n"
            "Explains a crash bundle offline: the crashed process (manifest.json), how the\n"
            "capture went (capture.json), the bundle's members, and from the core: the crashed\n"
            "thread, the signal and its cause, and every thread's symbolized frames.\n"
            "\n"
            "  --json             print one JSON object (format crashpack-report/1) instead of text\n"
            "  --members          text: print only the member table (name, size, compressed, frames)\n"
            "  --explain          show which signature rule kept or skipped each frame of the\n"
            "                     crashed thread (JSON: signature_info.explain[])\n"
            "  --sysroot DIR      look the core's binaries up under DIR (and only there)\n"
            "  --debug-dir DIR    separate debuginfo: DIR/.build-id/NN/REST.debug trees, and\n"
            "                     .gnu_debuglink targets (repeatable; /usr/lib/debug is always last)\n"
            "  --unwinder=KIND    dwfl (default: libdwfl with CFI, frame-pointer fallback; a thread\n"
            "                     libdwfl leaves cut short is unwound by libunwind as well), fp\n"
            "                     (frame-pointer chains only) or libunwind (libunwind-coredump for\n"
            "                     every thread), for comparison; implies --no-stacks\n"
            "  --max-frames N     frames kept per thread, innermost first (default 256);\n"
            "                     implies --no-stacks\n"
            "  --timeout SEC      time limit of the core analysis (default 180)\n"
            "  --in-process       analyze the core without the sandboxed child (debugging)\n"
            "  --db PATH          knowledge base whose user rules join the built-in rules\n"
            "                     (default: $CRASHPACK_DB, /var/lib/crashpack/kb.sqlite for root)\n"
            "  --no-stacks        ignore the bundle's stacks.json (the crashed host's analysis)\n"
            "  --no-cache         do not use or fill the cache of decompressed debug files\n"
            "                     ($CRASHPACK_CACHE_DIR, else ~/.cache/crashpack; off: none)\n"
            "  -h, --help         this help\n"
            "\n"
            "The core and the binaries are parsed in a child process with CPU, memory and time\n"
            "limits; if it fails, what it finished is still reported.\n"
            "\n"
            "Exit status: 0 complete, 1 partial (the bundle is cut short, or the core analysis\n"
            "did not complete; what could be read is shown) or unreadable, 2 usage error,\n"
            "3 no such bundle.\n");
}

/* ---- untrusted strings ---- */

/* Prints s for a terminal: controls (C0, DEL, C1) and invalid UTF-8 as escapes. */
static void put_safe(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = cp_utf8_seq(p, (size_t)-1);
        if (n == 0) {
            fprintf(out, "\\x%02x", *p);
            p++;
        } else if (n == 1 && (*p < 0x20 || *p == 0x7f)) {
            if (*p == '\n')
                fputs("\\n", out);
            else if (*p == '\t')
                fputs("\\t", out);
            else
                fprintf(out, "\\x%02x", *p);
            p++;
        } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) { /* U+0080..U+009F */
            fprintf(out, "\\u%04x", p[1]);
            p += 2;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

static const struct report_text_ops text_ops = {.clean = cp_utf8_clean, .put = put_safe};

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

static double num_or(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static const char *str_or(const cJSON *o, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
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
    if (cJSON_IsNumber(num) && num->valuedouble >= 0 && num->valuedouble < 1024) {
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
        double t = num_or(man, "time", -1);
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

/* capture{}: from capture.json (and its salvage record), plus what the member table says. */
static cJSON *capture_part(struct bundle *b, const cJSON *man, const cJSON *cap, const char *capwhy,
                           const cJSON *salv)
{
    cJSON *c = cJSON_CreateObject();
    const char *status = str_or(cap, "status", NULL);
    if (!status && salv)
        status = str_or(salv, "status", NULL);
    add_str(c, "status", status ? status : bundle_complete(b) ? "unknown" : "partial");
    if (!cap)
        add_str(c, "capture_json_error", capwhy);

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

    cJSON *bad = cJSON_AddArrayToObject(c, "failed_steps");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(cap, "steps"), *s;
    int nsteps = 0;
    cJSON_ArrayForEach(s, steps)
    {
        nsteps++;
        const char *st = str_or(s, "status", NULL);
        if (!cJSON_IsObject(s) || (st && !strcmp(st, "ok")))
            continue;
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", str_or(s, "name", "?"));
        add_str(o, "status", st ? st : "?");
        copy_str(o, "reason", s, "reason");
        copy_num(o, "ms", s, "ms");
        cJSON_AddItemToArray(bad, o);
    }
    cJSON_AddNumberToObject(c, "steps", nsteps);
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

static cJSON *build_report(struct bundle *b, const char *path)
{
    char manwhy[256] = "", capwhy[256] = "", salvwhy[256] = "";
    cJSON *man = read_json(b, "manifest.json", manwhy, sizeof(manwhy));
    cJSON *cap = read_json(b, "capture.json", capwhy, sizeof(capwhy));
    (void)salvwhy;
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

/* ---- text output ---- */

static const char *human(double n, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (n >= 1024 && u < 5) {
        n /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", n);
    else
        snprintf(buf, len, "%.1f %s", n, unit[u]);
    return buf;
}

static const char *gstr(const cJSON *r, const char *path)
{
    const cJSON *v = cp_jpath(r, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int gnum(const cJSON *r, const char *path, double *out)
{
    const cJSON *v = cp_jpath(r, path);
    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

static void label(FILE *out, const char *l)
{
    fprintf(out, "%-10s", l);
}

static void print_members(FILE *out, const cJSON *r)
{
    const cJSON *m;
    size_t w = 4;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "members"))
    {
        size_t l = strlen(gstr(m, "name") ? gstr(m, "name") : "");
        if (l > w)
            w = l < 40 ? l : 40;
    }
    fprintf(out, "  %-*s %12s %12s %7s\n", (int)w, "name", "size", "compressed", "frames");
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "members"))
    {
        const char *name = gstr(m, "name");
        double size = 0, comp = 0, frames = 0, avail = 0;
        gnum(m, "size", &size);
        gnum(m, "compressed_size", &comp);
        gnum(m, "frames", &frames);
        gnum(m, "available", &avail);
        char a[32], c[32], v[32];
        fputs("  ", out);
        put_safe(out, name ? name : "?");
        size_t l = name ? strlen(name) : 1;
        fprintf(out, "%*s %12s %12s %7.0f", (int)(l < w ? w - l : 0), "", human(size, a, sizeof(a)),
                human(comp, c, sizeof(c)), frames);
        if (cJSON_IsTrue(cp_jpath(m, "truncated")))
            fprintf(out, "  TRUNCATED: %s available", human(avail, v, sizeof(v)));
        fputc('\n', out);
    }
}

static void print_text(FILE *out, const cJSON *r, int members_only)
{
    if (members_only) {
        print_members(out, r);
        return;
    }
    char a[32], c2[32], c3[32];
    double v = 0, v2 = 0;
    const char *s;
    int complete = cJSON_IsTrue(cp_jpath(r, "bundle.complete"));

    label(out, "bundle");
    put_safe(out, gstr(r, "bundle.path") ? gstr(r, "bundle.path") : "?");
    gnum(r, "bundle.file_size", &v);
    fprintf(out, " (%s, %d members)\n", human(v, a, sizeof(a)),
            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "members")));
    if (!complete) {
        label(out, "PARTIAL");
        put_safe(out, gstr(r, "bundle.partial_reason") ? gstr(r, "bundle.partial_reason") : "");
        fputc('\n', out);
    }
    if ((s = gstr(r, "bundle.manifest_error"))) {
        label(out, "manifest");
        fputs("unreadable: ", out);
        put_safe(out, s);
        fputc('\n', out);
    }

    label(out, "process");
    if (gnum(r, "process.pid", &v))
        fprintf(out, "pid %.0f", v);
    else
        fputs("pid ?", out);
    if (gnum(r, "process.crashed_tid", &v))
        fprintf(out, ", crashed tid %.0f", v);
    if (gnum(r, "process.signal.number", &v)) {
        fprintf(out, ", signal %.0f (", v);
        put_safe(out, gstr(r, "process.signal.name") ? gstr(r, "process.signal.name") : "?");
        fputc(')', out);
    }
    fputc('\n', out);
    if ((s = gstr(r, "process.exe"))) {
        label(out, "exe");
        put_safe(out, s);
        fputc('\n', out);
    }
    const cJSON *args = cp_jpath(r, "process.cmdline"), *arg;
    if (cJSON_GetArraySize(args) > 0) {
        label(out, "cmdline");
        int first = 1;
        cJSON_ArrayForEach(arg, args)
        {
            if (!first)
                fputc(' ', out);
            first = 0;
            int quote = !arg->valuestring[0] || strpbrk(arg->valuestring, " \t'\"\\$`") != NULL;
            if (quote)
                fputc('\'', out);
            put_safe(out, arg->valuestring);
            if (quote)
                fputc('\'', out);
        }
        fputc('\n', out);
    }
    if (gnum(r, "process.uid", &v)) {
        label(out, "user");
        fprintf(out, "uid %.0f", v);
        if (gnum(r, "process.gid", &v2))
            fprintf(out, ", gid %.0f", v2);
        if (cJSON_IsTrue(cp_jpath(r, "process.secure")))
            fputs(" (secure: setuid/capabilities or not dumpable)", out);
        fputc('\n', out);
    }
    if ((s = gstr(r, "host.hostname")) || gstr(r, "host.kernel")) {
        label(out, "host");
        put_safe(out, s ? s : "?");
        if ((s = gstr(r, "host.kernel"))) {
            fputs(", kernel ", out);
            put_safe(out, s);
        }
        fputc('\n', out);
    }
    if ((s = gstr(r, "host.time_utc")) || gnum(r, "host.time", &v)) {
        label(out, "time");
        if (s)
            put_safe(out, s);
        if (gnum(r, "host.time", &v))
            fprintf(out, "%s%.0f%s", s ? " (" : "", v, s ? ")" : "");
        fputc('\n', out);
    }

    signature_print(out, r, put_safe);
    report_native_print(out, r, &text_ops);
    evidence_print(out, r, &text_ops);
    fputc('\n', out);

    label(out, "capture");
    put_safe(out, gstr(r, "capture.status") ? gstr(r, "capture.status") : "?");
    if ((s = gstr(r, "capture.mode.effective"))) {
        fputs(", mode ", out);
        put_safe(out, s);
        const char *req = gstr(r, "capture.mode.requested");
        if (req && strcmp(req, s)) {
            fputs(" (requested ", out);
            put_safe(out, req);
            fputc(')', out);
        }
        if ((s = gstr(r, "capture.mode.reason"))) {
            fputs(": ", out);
            put_safe(out, s);
        }
    }
    if ((s = gstr(r, "capture.capture_json_error"))) {
        fputs("; capture.json ", out);
        put_safe(out, s);
    }
    fputc('\n', out);
    if ((s = gstr(r, "capture.salvage.note"))) {
        label(out, "salvaged");
        put_safe(out, s);
        if ((s = gstr(r, "capture.salvage.cut_member"))) {
            fputs("; cut member ", out);
            put_safe(out, s);
        }
        fputc('\n', out);
    }
    const cJSON *core = cp_jpath(r, "capture.core");
    if (core && cJSON_GetArraySize(core) > 0) {
        label(out, "core");
        int any = 0;
        if (gnum(core, "declared_size", &v)) {
            fprintf(out, "%s declared", human(v, a, sizeof(a)));
            any = 1;
        } else if (gnum(core, "member_size", &v)) {
            fprintf(out, "%s", human(v, a, sizeof(a)));
            any = 1;
        }
        if (gnum(core, "stored_bytes", &v)) {
            fprintf(out, "%s%s stored", any ? ", " : "", human(v, c2, sizeof(c2)));
            any = 1;
        }
        if (gnum(core, "member_compressed", &v)) {
            fprintf(out, "%s%s compressed", any ? ", " : "", human(v, c3, sizeof(c3)));
            if (gnum(core, "ratio", &v2))
                fprintf(out, " (%.1fx)", v2);
            any = 1;
        }
        if (cJSON_IsTrue(cp_jpath(core, "truncated"))) {
            fprintf(out, "%sTRUNCATED", any ? "; " : "");
            if ((s = gstr(core, "truncation_reason"))) {
                fputs(": ", out);
                put_safe(out, s);
            }
            any = 1;
        } else if (cJSON_IsFalse(cp_jpath(core, "truncated"))) {
            fprintf(out, "%snot truncated", any ? "; " : "");
            any = 1;
        }
        if (cJSON_IsTrue(cp_jpath(core, "member_truncated")) && gnum(core, "member_available", &v)) {
            fprintf(out, "%scut short in this file: %s available", any ? "; " : "",
                    human(v, a, sizeof(a)));
            any = 1;
        }
        if ((s = gstr(core, "error"))) {
            fprintf(out, "%serror: ", any ? "; " : "");
            put_safe(out, s);
        }
        fputc('\n', out);
    }
    const cJSON *steps = cp_jpath(r, "capture.failed_steps"), *st;
    int first = 1;
    cJSON_ArrayForEach(st, steps)
    {
        label(out, first ? "not ok" : "");
        first = 0;
        put_safe(out, gstr(st, "name") ? gstr(st, "name") : "?");
        fputs(": ", out);
        put_safe(out, gstr(st, "status") ? gstr(st, "status") : "?");
        if ((s = gstr(st, "reason"))) {
            fputs(" (", out);
            put_safe(out, s);
            fputc(')', out);
        }
        fputc('\n', out);
    }
    fputs("members\n", out);
    print_members(out, r);
}

#define MAX_DEBUG_DIRS 64
#define THREADS_JSON_MAX (16u << 20)

struct analyze_args {
    int json, members_only, explain;
    int no_stacks; /* --no-stacks: ignore stacks.json */
    const char *path;
    const char *db; /* knowledge base whose user rules join the built-ins (NULL: the default) */
    struct native_opts native;
    const char *debug_dirs[MAX_DEBUG_DIRS];
    int no_cache; /* --no-cache: no decompressed-debuginfo cache */
    char cache_dir[4096];
};

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct analyze_args *A, int argc, char **argv)
{
    enum { O_JSON = 256, O_MEMBERS, O_EXPLAIN, O_INPROC, O_NOSTACKS, O_NOCACHE, O_DB, O_SYSROOT,
           O_DEBUGDIR, O_UNWINDER, O_MAXFRAMES, O_TIMEOUT };
    static const struct option longs[] = {
        {"json", no_argument, 0, O_JSON}, {"members", no_argument, 0, O_MEMBERS},
        {"explain", no_argument, 0, O_EXPLAIN}, {"in-process", no_argument, 0, O_INPROC},
        {"no-stacks", no_argument, 0, O_NOSTACKS}, {"no-cache", no_argument, 0, O_NOCACHE},
        {"db", required_argument, 0, O_DB}, {"sysroot", required_argument, 0, O_SYSROOT},
        {"debug-dir", required_argument, 0, O_DEBUGDIR}, {"unwinder", required_argument, 0, O_UNWINDER},
        {"max-frames", required_argument, 0, O_MAXFRAMES}, {"timeout", required_argument, 0, O_TIMEOUT},
        CP_OPT_HELP, CP_OPT_END};
    struct cp_opts p = {.verb = "crashpack analyze", .longs = longs, .argc = argc, .argv = argv};
    struct modules_opts *mo = &A->native.unwind.mods;
    long long n;
    int c;
    while ((c = cp_getopt(&p)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CP_EXIT_OK;
        case O_JSON: A->json = 1; break;
        case O_MEMBERS: A->members_only = 1; break;
        case O_EXPLAIN: A->explain = 1; break;
        case O_INPROC: A->native.in_process = 1; break;
        case O_NOSTACKS: A->no_stacks = 1; break;
        case O_NOCACHE: A->no_cache = 1; break;
        case O_DB: A->db = optarg; break;
        case O_SYSROOT: mo->sysroot = optarg; break;
        case O_DEBUGDIR:
            if (mo->ndebug_dirs == MAX_DEBUG_DIRS)
                return cp_usage_error(&p, "--debug-dir `%s`: at most %d of them", optarg, MAX_DEBUG_DIRS);
            A->debug_dirs[mo->ndebug_dirs++] = optarg;
            break;
        case O_UNWINDER:
            if (!strcmp(optarg, "dwfl"))
                A->native.unwind.method = UNWIND_DWFL;
            else if (!strcmp(optarg, "fp"))
                A->native.unwind.method = UNWIND_FP;
            else if (!strcmp(optarg, "libunwind"))
                A->native.unwind.method = UNWIND_LIBUNWIND;
            else
                return cp_usage_error(&p, "--unwinder `%s`: expected dwfl, fp or libunwind", optarg);
            A->no_stacks = 1; /* the user asked for this unwinder's frames, not the crashed host's */
            break;
        case O_MAXFRAMES:
            if (cp_opt_num(&p, "--max-frames", optarg, 1, 1000000, &n))
                return CP_EXIT_USAGE;
            A->native.unwind.max_frames = (unsigned)n;
            A->no_stacks = 1;
            break;
        case O_TIMEOUT:
            if (cp_opt_num(&p, "--timeout", optarg, 1, 86400, &n))
                return CP_EXIT_USAGE;
            A->native.wall_s = (unsigned)n;
            A->native.cpu_s = (unsigned)n;
            break;
        default:
            return CP_EXIT_USAGE;
        }
    }
    if (cp_opt_args(&p, 1, 1, "BUNDLE"))
        return CP_EXIT_USAGE;
    A->path = argv[optind];
    if (access(A->path, F_OK) && errno == ENOENT) {
        fprintf(stderr, "crashpack analyze: no such bundle: ");
        put_safe(stderr, A->path);
        fputc('\n', stderr);
        return CP_EXIT_NOTFOUND;
    }
    A->native.unwind.mods.debug_dirs = A->debug_dirs;
    if (!A->no_cache && !dcache_default_dir(A->cache_dir, sizeof(A->cache_dir)))
        A->native.unwind.cache_dir = A->cache_dir;
    return -1;
}

/* Collects the native analysis started in cmd_analyze and merges it into r. Returns 1 when it
 * did not complete. */
static int add_native(struct bundle *b, cJSON *r, struct analyze_args *A, struct native_job *nj)
{
    if (!bundle_find(b, "core")) {
        native_cancel(nj);
        report_native_skipped(r, "no core in this bundle (a metadata-only capture)");
        stacks_annotate(r, NULL, &text_ops);
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
        nat = stacks_apply(b, nat, A->no_stacks, &failed, &sinfo);
    if (!nat) {
        report_native_skipped(r, "out of memory");
        cJSON_Delete(sinfo);
        cJSON_Delete(threads);
        return 1;
    }
    report_native_merge(r, nat, cJSON_IsArray(threads) ? threads : NULL, &text_ops);
    stacks_annotate(r, sinfo, &text_ops);
    cJSON_Delete(threads);
    return failed;
}

int cmd_analyze(int argc, char **argv)
{
    struct analyze_args A;
    memset(&A, 0, sizeof(A));
    int rc = parse_args(&A, argc, argv);
    if (rc >= 0)
        return rc;

    /* the child that unwinds starts first and opens the bundle itself: forked before this process
     * has touched the bundle, it copies few pages on write. It works while this process decodes
     * the evidence and loads the rule base. */
    struct native_job *nj = !A.members_only ? native_start_path(A.path, &A.native) : NULL;
    struct bundle *b = NULL;
    char err[512];
    if (bundle_open(A.path, &b, err, sizeof(err))) {
        native_cancel(nj);
        fprintf(stderr, "crashpack analyze: ");
        put_safe(stderr, err);
        fputc('\n', stderr);
        return CP_EXIT_PROBLEM;
    }
    cJSON *r = build_report(b, A.path);
    int complete = bundle_complete(b);
    if (!r) {
        native_cancel(nj);
        nj = NULL;
    }
    if (r && !A.members_only) {
        char everr[1024] = "";
        if (evidence_add(r, b, everr, sizeof(everr)))
            cJSON_AddStringToObject(r, "evidence_error", everr);
    }
    /* the rule base, which the last step needs */
    char derr[512] = "";
    struct rulebase *rb = r && !A.members_only ? diagnose_open(A.db, derr, sizeof(derr)) : NULL;
    /* and the signature's skip and prefix lists */
    char lerr[512] = "";
    struct siglists *L = r && !A.members_only ? siglists_load(NULL, lerr, sizeof(lerr)) : NULL;
    int native_failed = r && !A.members_only ? add_native(b, r, &A, nj) : 0;
    if (r && !A.members_only)
        hang_analyze(b, r); /* after the frames: threads[].hang_state, hang.deadlocks */
    if (r && !A.members_only) /* after hang: a snap's kind is "hang"; failures in signature_info.error */
        signature_compute(r, L, lerr, A.explain, err, sizeof(err));
    siglists_free(L);
    bundle_close(b);
    if (!r) {
        fprintf(stderr, "crashpack analyze: out of memory\n");
        return CP_EXIT_PROBLEM;
    }
    if (A.json && gstr(r, "analysis.stacks_json.warning")) { /* text prints it anyway */
        fprintf(stderr, "crashpack analyze: warning: ");
        put_safe(stderr, gstr(r, "analysis.stacks_json.warning"));
        fputc('\n', stderr);
    }
    /* last step: the rule base reads every field the analysis filled in */
    if (!A.members_only && diagnose_with(r, rb, derr, sizeof(derr)) < 0) {
        fprintf(stderr, "crashpack analyze: diagnosis: ");
        put_safe(stderr, derr);
        fputc('\n', stderr);
    }
    if (native_failed) {
        const char *e = gstr(r, "analysis.error");
        fprintf(stderr, "crashpack analyze: the core analysis is incomplete: ");
        put_safe(stderr, e ? e : "unknown error");
        fputc('\n', stderr);
    }
    if (A.json) {
        char *s = cJSON_Print(r);
        if (!s) {
            cJSON_Delete(r);
            fprintf(stderr, "crashpack analyze: out of memory\n");
            return CP_EXIT_PROBLEM;
        }
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    } else {
        print_text(stdout, r, A.members_only);
        hang_print_text(stdout, r);
        if (!A.members_only)
            diagnose_print(stdout, r, put_safe);
    }
    cJSON_Delete(r);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "crashpack analyze: cannot write the output\n");
        return CP_EXIT_PROBLEM;
    }
    return complete && !native_failed ? 0 : 1;
}
