/* test_signature.c - unit tests of analyze/report/signature.c over hand-made reports, with the
 * shipped lists (rules/signature, found through the data root) and with lists written here.
 *
 * Checks: skip and prefix behaviour, stop frames, clone-suffix and module-version normalization,
 * pcs/offsets/inline/tail-call frames not changing the fingerprint, different callers changing it,
 * crash kinds, recursion, explain[], and list errors (missing file, version mismatch, bad regex);
 * the deaths without a core: output lines normalized, programs named, exit/OOM/termination/signal
 * signatures, Python exceptions through python.txt (crashpack's frames dropped, library frames
 * skipped).
 */
#include "signature.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                           \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

static struct siglists *L;

/* A report: signal (number, code, fault address or NULL), cause JSON (or NULL) and a frame list
 * "function@module@pc[@i|@t]" separated by ';' (function "-" = none, module "-" = none). */
static cJSON *report(int sig, int code, const char *fault, const char *cause, const char *frames)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *p = cJSON_AddObjectToObject(r, "process");
    cJSON_AddNumberToObject(p, "crashed_tid", 42);
    cJSON *s = cJSON_AddObjectToObject(p, "signal");
    cJSON_AddNumberToObject(s, "number", sig);
    cJSON_AddStringToObject(s, "name", sig == 11 ? "SIGSEGV" : sig == 6 ? "SIGABRT" : "SIGTERM");
    cJSON_AddNumberToObject(s, "code", code);
    if (code == 128)
        cJSON_AddStringToObject(s, "code_name", "SI_KERNEL");
    if (fault)
        cJSON_AddStringToObject(s, "fault_address", fault);
    else
        cJSON_AddNullToObject(s, "fault_address");
    if (sig == 6)
        cJSON_AddBoolToObject(s, "self_sent", 1);
    cJSON *c = cause ? cJSON_Parse(cause) : NULL;
    cJSON_AddItemToObject(r, "cause", c ? c : cJSON_CreateObject());
    cJSON *threads = cJSON_AddArrayToObject(r, "threads");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "tid", 42);
    cJSON_AddBoolToObject(t, "crashed", 1);
    cJSON *fr = cJSON_AddArrayToObject(t, "frames");
    char *dup = strdup(frames), *save = NULL;
    for (char *tok = strtok_r(dup, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char *fn = tok, *mod = strchr(fn, '@');
        *mod++ = 0;
        char *pc = strchr(mod, '@');
        *pc++ = 0;
        char *flag = strchr(pc, '@');
        if (flag)
            *flag++ = 0;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "pc", pc);
        if (strcmp(fn, "-"))
            cJSON_AddStringToObject(f, "function", fn);
        else
            cJSON_AddNullToObject(f, "function");
        if (strcmp(mod, "-"))
            cJSON_AddStringToObject(f, "module", mod);
        else
            cJSON_AddNullToObject(f, "module");
        cJSON_AddBoolToObject(f, "inline", flag && *flag == 'i');
        if (flag && *flag == 't')
            cJSON_AddBoolToObject(f, "tail_call", 1);
        cJSON_AddItemToArray(fr, f);
    }
    free(dup);
    cJSON_AddItemToArray(threads, t);
    return r;
}

static char sigbuf[1024], fpbuf[64], kindbuf[64];

/* Computes; copies signature, fingerprint, crash_kind into the buffers; returns the report. */
static cJSON *run(cJSON *r, int explain)
{
    char err[256] = "";
    int rc = signature_compute(r, L, NULL, explain, err, sizeof(err));
    const cJSON *s = cJSON_GetObjectItem(r, "signature"), *f = cJSON_GetObjectItem(r, "fingerprint");
    const cJSON *k = cJSON_GetObjectItem(r, "crash_kind");
    snprintf(sigbuf, sizeof(sigbuf), "%s", cJSON_IsString(s) ? s->valuestring : "(null)");
    snprintf(fpbuf, sizeof(fpbuf), "%s", cJSON_IsString(f) ? f->valuestring : "(null)");
    snprintf(kindbuf, sizeof(kindbuf), "%s", cJSON_IsString(k) ? k->valuestring : "(null)");
    if (rc)
        fprintf(stderr, "  (signature_compute: %s)\n", err);
    return r;
}

static void sig_of(int sig, int code, const char *fault, const char *cause, const char *frames,
                   char *s, char *fp, char *kind)
{
    cJSON_Delete(run(report(sig, code, fault, cause, frames), 0));
    if (s)
        strcpy(s, sigbuf);
    if (fp)
        strcpy(fp, fpbuf);
    if (kind)
        strcpy(kind, kindbuf);
}

static void norm(void)
{
    static const char *const f[][2] = {
        {"store_slot.constprop.0.isra.0", "store_slot"},
        {"process.cold", "process"},
        {"process.part.0", "process"},
        {"helper.lto_priv.0", "helper"},
        {"fn.llvm.1234567", "fn"},
        {"ns::Klass::run(int, char const*) const", "ns::Klass::run"},
        {"ns::Klass::run() [clone .cold]", "ns::Klass::run"},
        {"__libc_start_main@@GLIBC_2.34", "__libc_start_main"},
        {"__GI_raise", "raise"},
        {"__GI___assert_fail", "__assert_fail"},
        {"(anonymous namespace)::worker", "(anonymous namespace)::worker"},
        {"Functor::operator()", "Functor::operator()"},
        {"Functor::operator()(int)", "Functor::operator()"},
        {"operator new(unsigned long)", "operator new"},
        {"@0x0", "@0x0"},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        signature_norm_function(f[i][0], out, sizeof(out));
        if (strcmp(out, f[i][1])) {
            fprintf(stderr, "FAIL norm_function(%s) = %s, want %s\n", f[i][0], out, f[i][1]);
            fails++;
        }
    }
    static const char *const m[][2] = {
        {"libstdc++.so.6.0.30", "libstdc++.so"}, {"/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so"},
        {"cp-sigbug", "cp-sigbug"},             {"/opt/app/bin/train (deleted)", "train"},
        {"libfoo.so", "libfoo.so"},             {"libtorch_cuda.so", "libtorch_cuda.so"},
        {"libx.so.1.beta", "libx.so.1.beta"},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        signature_norm_module(m[i][0], out, sizeof(out));
        if (strcmp(out, m[i][1])) {
            fprintf(stderr, "FAIL norm_module(%s) = %s, want %s\n", m[i][0], out, m[i][1]);
            fails++;
        }
    }
}

#define LIBC_ABORT                                                                                 \
    "__pthread_kill_implementation@libc.so.6@0x7f0000001000;"                                      \
    "__pthread_kill_internal@libc.so.6@0x7f0000001010@t;"                                          \
    "__GI_raise@libc.so.6@0x7f0000002000;__GI_abort@libc.so.6@0x7f0000003000;"
#define MAIN_TAIL                                                                                  \
    "main@app@0x555500001000;__libc_start_call_main@libc.so.6@0x7f0000004000;"                     \
    "__libc_start_main_impl@libc.so.6@0x7f0000005000;_start@app@0x555500000100"

static void skip_prefix_stop(void)
{
    char s[1024], fp[64], kind[64];
    /* skip: the abort machinery */
    sig_of(6, -6, NULL, NULL, LIBC_ABORT "leaf@app@0x555500001100;mid@app@0x555500001200;" MAIN_TAIL,
           s, fp, kind);
    CHECK(!strcmp(s, "abort | leaf | mid | main"));
    CHECK(!strcmp(kind, "abort"));
    /* the same without libc symbols: unnamed libc frames are skipped too */
    char s2[1024], fp2[64];
    sig_of(6, -6, NULL, NULL,
           "-@libc.so.6@0x7f0000001000;-@libc.so.6@0x7f0000002000;-@libc.so.6@0x7f0000003000;"
           "leaf@app@0x555500001100;mid@app@0x555500001200;" MAIN_TAIL,
           s2, fp2, NULL);
    CHECK(!strcmp(s2, s));
    CHECK(!strcmp(fp2, fp));
    /* prefix: memcpy's IFUNC variant and free are kept and continued through; they do not count */
    sig_of(11, 1, "0x7ffd00000000", NULL,
           "__memmove_avx_unaligned_erms@libc.so.6@0x7f0000001000;__GI_memcpy@libc.so.6@0x7f0000001100;"
           "copy_record@app@0x555500001100;load@app@0x555500001200;parse@app@0x555500001300;"
           "run@app@0x555500001400;" MAIN_TAIL,
           s, NULL, kind);
    CHECK(!strcmp(s, "SIGSEGV | __memmove_avx_unaligned_erms | memcpy | copy_record | load | parse"));
    CHECK(!strcmp(kind, "segv"));
    sig_of(6, -6, NULL, "{\"abort_message\": \"free(): double free detected in tcache 2\"}",
           LIBC_ABORT "malloc_printerr@libc.so.6@0x7f0000006000;_int_free@libc.so.6@0x7f0000007000;"
                      "__GI___libc_free@libc.so.6@0x7f0000008000;release@app@0x555500001100;" MAIN_TAIL,
           s, NULL, kind);
    CHECK(!strcmp(s, "heap corruption | _int_free | __libc_free | release | main"));
    CHECK(!strcmp(kind, "heap_corruption"));
    /* stop: a worker thread's start_thread/clone3 end the walk */
    sig_of(11, 1, "0x10", NULL,
           "work@app@0x555500001100;start_thread@libc.so.6@0x7f0000001000;clone3@libc.so.6@0x7f0000002000",
           s, NULL, kind);
    CHECK(!strcmp(s, "SIGSEGV (null) | work"));
    CHECK(!strcmp(kind, "segv_null"));
    /* NULL function pointer call: the pc-0 frame is a prefix frame */
    sig_of(11, 1, "0x0", NULL, "-@-@0x0;dispatch@app@0x555500001100;handle@app@0x555500001200;" MAIN_TAIL, s,
           NULL, NULL);
    CHECK(!strcmp(s, "SIGSEGV (null) | @0x0 | dispatch | handle | main"));
    /* unnamed frame in an application module */
    sig_of(11, 1, "0x5000", NULL, "-@libcustom.so.2@0x7f0000001000;caller@app@0x555500001100;" MAIN_TAIL, s,
           NULL, NULL);
    CHECK(!strcmp(s, "SIGSEGV | libcustom.so!? | caller | main"));
    /* recursion: repeats collapse, whatever the depth */
    char fpa[64], fpb[64];
    sig_of(11, 1, "0x7ffd00000ff0", "{\"stack_overflow\": true}",
           "descend@app@0x1;descend@app@0x2;descend@app@0x2;descend@app@0x2", s, fpa, kind);
    CHECK(!strcmp(s, "stack overflow | descend"));
    CHECK(!strcmp(kind, "stack_overflow"));
    sig_of(11, 1, "0x7ffd00000ff0", "{\"stack_overflow\": true}",
           "descend@app@0x1;descend@app@0x2;descend@app@0x2;descend@app@0x2;descend@app@0x2;descend@app@0x2",
           NULL, fpb, NULL);
    CHECK(!strcmp(fpa, fpb));
}

static void stability(void)
{
    char s1[1024], s2[1024], f1[64], f2[64], f3[64];
    /* -O2 (symbol table: clone suffixes, versioned library names) vs -O2 -g (DWARF names, inline
     * and tail-call frames), different pcs and load addresses */
    sig_of(11, 1, "0x8", NULL,
           "store_slot.constprop.0.isra.0@cp-sigbug@0x5555555551d0;ingest_batch@cp-sigbug@0x55555555524e;"
           "helper@libhelp.so.1.2@0x7f0000001000;" MAIN_TAIL,
           s1, f1, NULL);
    sig_of(11, 1, "0x8", NULL,
           "check@cp-sigbug@0x5612345671d0@i;store_slot@cp-sigbug@0x5612345671d0;"
           "ingest_batch@cp-sigbug@0x56123456728e;step@cp-sigbug@0x5612345672a0@t;"
           "helper(int)@libhelp.so.1.3@0x7fab00002000;"
           "main@cp-sigbug@0x561234561000;__libc_start_call_main@libc.so.6@0x7fab00004000;"
           "__libc_start_main_impl@libc.so.6@0x7fab00005000;_start@cp-sigbug@0x561234560100",
           s2, f2, NULL);
    CHECK(!strcmp(s1, "SIGSEGV (null) | store_slot | ingest_batch | helper"));
    CHECK(!strcmp(s1, s2));
    CHECK(!strcmp(f1, f2));
    CHECK(strlen(f1) == 16 && strspn(f1, "0123456789abcdef") == 16);
    /* a different caller: different signature and fingerprint */
    sig_of(11, 1, "0x8", NULL,
           "store_slot.constprop.0.isra.0@cp-sigbug@0x5555555551d0;replay_log@cp-sigbug@0x55555555524e;"
           "helper@libhelp.so.1.2@0x7f0000001000;" MAIN_TAIL,
           s2, f3, NULL);
    CHECK(strcmp(s1, s2) != 0);
    CHECK(strcmp(f1, f3) != 0);
    /* the same frames in another module: a different fingerprint, the same signature */
    sig_of(11, 1, "0x8", NULL,
           "store_slot@other@0x1;ingest_batch@other@0x2;helper@libhelp.so.1.2@0x7f0000001000;" MAIN_TAIL, s2,
           f3, NULL);
    CHECK(!strcmp(s1, s2));
    CHECK(strcmp(f1, f3) != 0);
    /* a different crash kind: a different fingerprint */
    sig_of(11, 1, "0x123456", NULL,
           "store_slot@cp-sigbug@0x1;ingest_batch@cp-sigbug@0x2;helper@libhelp.so.1.2@0x3;" MAIN_TAIL, s2, f3,
           NULL);
    CHECK(strcmp(f1, f3) != 0);
}

static void kinds(void)
{
    char k[64];
    const char *fr = "f@app@0x1;" MAIN_TAIL;
    sig_of(11, 128, "0x0", NULL, fr, NULL, NULL, k); /* general protection: si_addr 0, not NULL */
    CHECK(!strcmp(k, "segv"));
    sig_of(11, 0, NULL, NULL, fr, NULL, NULL, k); /* kill -SEGV */
    CHECK(!strcmp(k, "signal"));
    sig_of(7, 2, "0x7f0000000000", NULL, fr, NULL, NULL, k);
    CHECK(!strcmp(k, "sigbus"));
    sig_of(8, 1, "0x555500001000", NULL, fr, NULL, NULL, k);
    CHECK(!strcmp(k, "sigfpe"));
    sig_of(4, 2, "0x555500001000", NULL, fr, NULL, NULL, k);
    CHECK(!strcmp(k, "sigill"));
    char s[1024];
    sig_of(15, 0, NULL, NULL, fr, s, NULL, k);
    CHECK(!strcmp(k, "signal") && !strcmp(s, "SIGTERM | f | main"));
    sig_of(6, -6, NULL,
           "{\"abort_message\": \"prog: a.c:22: check: Assertion `count < limit' failed.\"}",
           LIBC_ABORT "__assert_fail_base.cold@libc.so.6@0x7f0000009000;__GI___assert_fail@libc.so.6@0x7f000000a000;"
                      "check@app@0x1@i;validate@app@0x1;" MAIN_TAIL,
           s, NULL, k);
    CHECK(!strcmp(k, "assertion") && !strcmp(s, "assertion | validate | main"));
    /* no message (no libc symbols for __abort_msg), but __assert_fail on the stack */
    sig_of(6, -6, NULL, NULL, LIBC_ABORT "__assert_fail@libc.so.6@0x7f000000a000;validate@app@0x1;" MAIN_TAIL,
           NULL, NULL, k);
    CHECK(!strcmp(k, "assertion"));
    sig_of(6, -6, NULL, "{\"exception\": {\"type\": \"std::runtime_error\", \"what\": \"x\"}}",
           LIBC_ABORT "-@libstdc++.so.6.0.30@0x7f1;std::terminate@libstdc++.so.6.0.30@0x7f2;"
                      "__cxa_throw@libstdc++.so.6.0.30@0x7f3;throw_it@app@0x1;" MAIN_TAIL,
           s, NULL, k);
    CHECK(!strcmp(k, "uncaught_exception") && !strcmp(s, "uncaught exception | throw_it | main"));
}

static void explain_and_errors(void)
{
    cJSON *r = run(report(6, -6, NULL, NULL, LIBC_ABORT "leaf@app@0x1;" MAIN_TAIL), 1);
    const cJSON *info = cJSON_GetObjectItem(r, "signature_info");
    const cJSON *ex = cJSON_GetObjectItem(info, "explain"), *e;
    CHECK(cJSON_GetArraySize(ex) == 9); /* every frame of the crashed thread */
    int saw_raise = 0, saw_tail = 0;
    cJSON_ArrayForEach(e, ex)
    {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        const char *action = cJSON_GetObjectItem(e, "action")->valuestring;
        const char *rule = cJSON_GetObjectItem(e, "rule")->valuestring;
        if (!strcmp(name, "libc.so!raise")) {
            saw_raise = !strcmp(action, "skip") && !strncmp(rule, "skip.txt:", 9) &&
                        strstr(rule, " raise") != NULL;
        }
        if (!strcmp(name, "libc.so!__pthread_kill_internal"))
            saw_tail = !strcmp(action, "tail_call");
        if (!strcmp(name, "app!leaf"))
            CHECK(!strcmp(action, "keep"));
        if (!strcmp(name, "libc.so!__libc_start_call_main"))
            CHECK(!strcmp(action, "stop"));
        if (!strcmp(name, "app!_start"))
            CHECK(!strcmp(action, "unused"));
    }
    CHECK(saw_raise);
    CHECK(saw_tail);
    CHECK(!strcmp(cJSON_GetObjectItem(info, "version")->valuestring, siglists_version(L)));
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(info, "error")));
    cJSON_Delete(r);

    /* no frames: no signature, but a kind */
    r = report(11, 1, "0x0", NULL, "");
    char err[256] = "";
    CHECK(signature_compute(r, L, NULL, 0, err, sizeof(err)) == -1);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(r, "signature")));
    CHECK(!strcmp(cJSON_GetObjectItem(r, "crash_kind")->valuestring, "segv_null"));
    CHECK(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "signature_info"), "error")->valuestring,
                 "no frames") != NULL);
    /* no lists */
    CHECK(signature_compute(r, NULL, "cannot open x", 0, err, sizeof(err)) == -1);
    CHECK(strstr(err, "cannot open x") != NULL);
    cJSON_Delete(r);

    /* lists written here: regex and unnamed rules; errors */
    char dir[] = "/tmp/cp-sigtest.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[512];
    struct {
        const char *file, *text;
    } files[] = {{"stop.txt", "version 7\nmain\n"},
                 {"skip.txt", "# c\nversion 7\nre:wrap_[0-9]+\nunnamed:libskip.so*\n"},
                 {"python.txt", "version 7\nskip file:/lib/*\n"},
                 {"prefix.txt", "version 7\n  pre*  \n"}};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i].file);
        FILE *f = fopen(p, "w");
        fputs(files[i].text, f);
        fclose(f);
    }
    struct siglists *mine = siglists_load(dir, err, sizeof(err));
    CHECK(mine != NULL);
    if (mine) {
        CHECK(!strcmp(siglists_version(mine), "7"));
        r = report(11, 1, "0x10", NULL,
                   "wrap_12@app@0x1;-@libskip.so.3@0x2;wrap_x@app@0x3;pre_a@app@0x4;a@app@0x5;main@app@0x6;z@app@0x7");
        signature_compute(r, mine, NULL, 0, err, sizeof(err));
        CHECK(!strcmp(cJSON_GetObjectItem(r, "signature")->valuestring,
                      "SIGSEGV (null) | wrap_x | pre_a | a"));
        cJSON_Delete(r);
        siglists_free(mine);
    }
    snprintf(p, sizeof(p), "%s/prefix.txt", dir);
    FILE *f = fopen(p, "w");
    fputs("version 8\nx\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "version 8") != NULL);
    f = fopen(p, "w");
    fputs("version 7\nre:(unclosed\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "prefix.txt:2") != NULL);
    f = fopen(p, "w");
    fputs("x\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "version") != NULL);
    unlink(p);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "prefix.txt") != NULL);
    /* python.txt: only drop/skip file:/function: lines, and the same version */
    f = fopen(p, "w");
    fputs("version 7\nx\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/python.txt", dir);
    f = fopen(p, "w");
    fputs("version 7\nkeep file:x\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "python.txt:2") != NULL);
    f = fopen(p, "w");
    fputs("version 7\nskip path:x\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "python.txt:2") != NULL);
    f = fopen(p, "w");
    fputs("version 6\nskip file:x\n", f);
    fclose(f);
    CHECK(siglists_load(dir, err, sizeof(err)) == NULL && strstr(err, "version 6") != NULL);
    unlink(p);
    snprintf(p, sizeof(p), "%s/prefix.txt", dir);
    unlink(p);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i].file);
        unlink(p);
    }
    rmdir(dir);
}

/* ---- deaths without a core (deathsig.c) ---- */

static void norm_line(void)
{
    static const char *const c[][2] = {
        {"error: shard 17 failed at 2026-01-01T10:00:00Z after 3.5s",
         "error: shard N failed at <time> after Ns"},
        {"error: shard 4242 failed at 2026-11-30 23:59:59.125+01:00 after 12.25s",
         "error: shard N failed at <time> after Ns"},
        {"[13:16:39] rank3: CUDA error at 0x7f3a2b10 (pid 18242)",
         "[<time>] rankN: CUDA error at <hex> (pid N)"},
        {"open /tmp/cpt.TL3mqU/model_epoch_12.pt: No such file",
         "open .../model_epoch_N.pt: No such file"},
        {"job 2e278d67-c25e-4a33-8a9b-8fd386fa7c5d commit deadbeef1234 done",
         "job <uuid> commit <hex> done"},
        {"\x1b[31mFATAL\x1b[0m:   bad   config\t\r", "FATAL: bad config"},
        {"Tried to allocate 20.00 GiB (GPU 0; 79.15 GiB total)",
         "Tried to allocate N GiB (GPU N; N GiB total)"},
        {"no digits here", "no digits here"},
        {"", ""},
    };
    char out[SIGNATURE_LINE_MAX + 1];
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        signature_norm_line(c[i][0], out, sizeof(out));
        if (strcmp(out, c[i][1])) {
            fprintf(stderr, "FAIL norm_line(%s) = '%s', want '%s'\n", c[i][0], out, c[i][1]);
            fails++;
        }
    }
    char longl[1000];
    memset(longl, 'a', sizeof(longl) - 1);
    longl[sizeof(longl) - 1] = 0;
    signature_norm_line(longl, out, sizeof(out));
    CHECK(strlen(out) == SIGNATURE_LINE_MAX);
}

/* A process object: exe (or NULL), comm (or NULL), argv separated by '|' (or NULL). */
static cJSON *proc(const char *exe, const char *comm, const char *argv)
{
    cJSON *p = cJSON_CreateObject();
    if (exe)
        cJSON_AddStringToObject(p, "exe", exe);
    if (comm)
        cJSON_AddStringToObject(p, "comm", comm);
    cJSON *a = cJSON_AddArrayToObject(p, "cmdline");
    char *dup = argv ? strdup(argv) : NULL, *save = NULL;
    for (char *t = dup ? strtok_r(dup, "|", &save) : NULL; t; t = strtok_r(NULL, "|", &save))
        cJSON_AddItemToArray(a, cJSON_CreateString(t));
    free(dup);
    return p;
}

static void program(void)
{
    static const char *const c[][4] = {
        {"/usr/bin/python3.11", NULL, "/usr/bin/python3|-u|/tmp/x.ABC/train.py|--lr|3",
         "python train.py"},
        {"/usr/bin/python3.11", NULL, "python3|-W|ignore|-m|torch.distributed.run|x.py",
         "python -m torch.distributed.run"},
        {"/usr/bin/python3.12", NULL, "python3|-c|raise SystemExit(3)", "python -c"},
        {"/usr/bin/bash", NULL, "bash|-c|exit 3", "bash -c"},
        {"/usr/bin/bash", NULL, "bash|/home/u/run.sh", "bash run.sh"},
        {NULL, "python3", NULL, "python"},
        {"/opt/app/bin/trainer (deleted)", NULL, "trainer|--x", "trainer"},
        {NULL, NULL, "/usr/local/bin/tool|a", "tool"},
        {NULL, NULL, NULL, "unknown program"},
    };
    char out[512];
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        cJSON *p = proc(c[i][0], c[i][1], c[i][2]);
        signature_program(p, out, sizeof(out));
        if (strcmp(out, c[i][3])) {
            fprintf(stderr, "FAIL program(%s) = '%s', want '%s'\n", c[i][2] ? c[i][2] : "-", out,
                    c[i][3]);
            fails++;
        }
        cJSON_Delete(p);
    }
}

/* A death report: kind, exit status (< 0: none), signal name (or NULL), the process, output lines
 * separated by '|' (or NULL), an OOM kill's scope (or NULL). */
static cJSON *death(const char *kind, int status, const char *sig, cJSON *p, const char *lines,
                    const char *scope)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "process", p);
    cJSON *d = cJSON_AddObjectToObject(p, "death");
    cJSON_AddStringToObject(d, "kind", kind);
    if (status >= 0)
        cJSON_AddNumberToObject(d, "status", status);
    else
        cJSON_AddNullToObject(d, "status");
    if (sig) {
        cJSON *s = cJSON_AddObjectToObject(d, "signal");
        cJSON_AddStringToObject(s, "name", sig);
    }
    cJSON *ps = cJSON_AddObjectToObject(p, "signal"); /* the killing signal, as pyexc.c sets it */
    int num = !sig ? 0 : !strcmp(sig, "SIGKILL") ? 9 : !strcmp(sig, "SIGTERM") ? 15 : 10;
    if (num)
        cJSON_AddNumberToObject(ps, "number", num);
    else
        cJSON_AddNullToObject(ps, "number");
    if (sig)
        cJSON_AddStringToObject(ps, "name", sig);
    else
        cJSON_AddNullToObject(ps, "name");
    cJSON_AddItemToObject(r, "threads", cJSON_CreateArray());
    if (lines) {
        cJSON *a = cJSON_AddArrayToObject(cJSON_AddObjectToObject(r, "output"), "last_lines");
        char *dup = strdup(lines), *save = NULL;
        for (char *t = strtok_r(dup, "|", &save); t; t = strtok_r(NULL, "|", &save))
            cJSON_AddItemToArray(a, cJSON_CreateString(t));
        free(dup);
    }
    if (scope) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "scope", scope);
        cJSON_AddBoolToObject(k, "own_pid", 1);
        cJSON *ks = cJSON_AddArrayToObject(cJSON_AddObjectToObject(r, "kernel_log"), "oom_kills");
        cJSON_AddItemToArray(ks, k);
    }
    return r;
}

static void deaths(void)
{
    char fp1[64], fp2[64];
    const char *bash = "bash|-c|x";
    cJSON_Delete(run(death("exit", 3, NULL, proc("/usr/bin/bash", NULL, bash),
                           "error: shard 17 failed at 2026-01-01T10:00:00Z after 3.5s", NULL),
                     0));
    CHECK(!strcmp(kindbuf, "exit"));
    CHECK(!strcmp(sigbuf, "exit status 3 | bash -c | error: shard N failed at <time> after Ns"));
    strcpy(fp1, fpbuf);
    cJSON_Delete(run(death("exit", 3, NULL, proc("/bin/bash", NULL, bash),
                           "error: shard 4242 failed at 2026-11-30T23:59:59Z after 12.25s", NULL),
                     0));
    CHECK(!strcmp(fp1, fpbuf)); /* numbers and times: the same bug */
    cJSON_Delete(run(
        death("exit", 3, NULL, proc("/usr/bin/bash", NULL, bash), "error: manifest missing", NULL),
        0));
    CHECK(strcmp(fp1, fpbuf)); /* another error line: another bug */
    cJSON_Delete(run(death("exit", 4, NULL, proc("/usr/bin/bash", NULL, bash),
                           "error: shard 17 failed at 2026-01-01T10:00:00Z after 3.5s", NULL),
                     0));
    CHECK(strcmp(fp1, fpbuf)); /* another status */
    CHECK(strlen(fpbuf) == 16);
    cJSON_Delete(
        run(death("exit", 1, NULL, proc("/usr/bin/python3", NULL, "python3|a.py"), NULL, NULL), 0));
    CHECK(!strcmp(sigbuf, "exit status 1 | python a.py"));
    strcpy(fp2, fpbuf);
    cJSON_Delete(
        run(death("exit", 1, NULL, proc("/usr/bin/python3", NULL, "python3|b.py"), NULL, NULL), 0));
    CHECK(strcmp(fp2, fpbuf)); /* another program */
    cJSON_Delete(
        run(death("oom_kill", -1, "SIGKILL", proc(NULL, "python3", NULL), NULL, "cgroup"), 0));
    CHECK(!strcmp(kindbuf, "oom_kill"));
    CHECK(!strcmp(sigbuf, "OOM kill | cgroup limit | python"));
    strcpy(fp2, fpbuf);
    cJSON_Delete(
        run(death("oom_kill", -1, "SIGKILL", proc(NULL, "python3", NULL), NULL, "global"), 0));
    CHECK(!strcmp(sigbuf, "OOM kill | host memory | python") && strcmp(fp2, fpbuf));
    cJSON_Delete(run(death("terminated", -1, "SIGTERM",
                           proc("/usr/bin/python3", NULL, "python3|t.py"), "step 5", NULL),
                     0));
    CHECK(!strcmp(sigbuf, "terminated | python t.py")); /* its last words are no identity */
    cJSON_Delete(run(
        death("signal", -1, "SIGUSR1", proc("/usr/bin/sleep", NULL, "sleep|30"), NULL, NULL), 0));
    CHECK(!strcmp(kindbuf, "signal") && !strcmp(sigbuf, "SIGUSR1 | sleep"));
}

/* A Python exception report: type, frames "file@function" separated by ';', from the output or
 * not. */
static cJSON *pyexc(const char *type, const char *frames, int from_output)
{
    cJSON *r = death(from_output ? "exit" : "exception", from_output ? 1 : -1, NULL,
                     proc("/usr/bin/python3", NULL, "python3|t.py"), NULL, NULL);
    cJSON *x = cJSON_AddObjectToObject(r, "exception");
    cJSON_AddStringToObject(x, "type", type);
    if (from_output)
        cJSON_AddStringToObject(x, "source", "output");
    cJSON *fr = cJSON_AddArrayToObject(x, "frames");
    char *dup = strdup(frames), *save = NULL;
    for (char *t = strtok_r(dup, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char *fn = strchr(t, '@');
        *fn++ = 0;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "file", t);
        cJSON_AddStringToObject(f, "function", fn);
        cJSON_AddNumberToObject(f, "line", 1);
        cJSON_AddItemToArray(fr, f);
    }
    free(dup);
    return r;
}

static void python(void)
{
    cJSON *r = run(
        pyexc("KeyError",
              "/home/u/t.py@<module>;/home/u/t.py@main;/usr/lib/python3.11/json/__init__.py@loads;"
              "/src/python/crashpack/_report.py@wrap;/home/u/lib.py@leaf",
              0),
        1);
    CHECK(!strcmp(kindbuf, "python_exception"));
    CHECK(!strcmp(sigbuf, "python exception KeyError | lib.py:leaf | t.py:main | t.py:<module>"));
    const cJSON *ex = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "signature_info"), "explain");
    CHECK(cJSON_GetArraySize(ex) == 5);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(ex, 1), "action")->valuestring, "drop"));
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(ex, 2), "action")->valuestring, "skip"));
    cJSON_Delete(r);
    /* only library frames: they are used; crashpack's own never */
    cJSON_Delete(
        run(pyexc("ValueError",
                  "<frozen runpy>@_run_module_as_main;/usr/lib/python3/dist-packages/torch/x.py@f;"
                  "/usr/lib/python3/dist-packages/_crashpack_hook.py@_crashpack_hook_main",
                  0),
            0));
    CHECK(!strcmp(sigbuf,
                  "python exception ValueError | x.py:f | <frozen runpy>:_run_module_as_main"));
    /* from the output: the same kind, source output; no frames: the type alone */
    r = run(pyexc("RuntimeError", "<string>@<module>", 1), 0);
    CHECK(!strcmp(kindbuf, "python_exception"));
    CHECK(!strcmp(sigbuf, "python exception RuntimeError | <string>:<module>"));
    CHECK(!strcmp(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "signature_info"), "source")->valuestring,
        "output"));
    cJSON_Delete(r);
    cJSON_Delete(run(pyexc("RuntimeError", "", 0), 0));
    CHECK(!strcmp(sigbuf, "python exception RuntimeError") && strlen(fpbuf) == 16);
}

int main(void)
{
    char err[512] = "";
    L = siglists_load(NULL, err, sizeof(err));
    if (!L) {
        fprintf(stderr, "FAIL: the shipped lists do not load: %s\n", err);
        return 1;
    }
    norm();
    skip_prefix_stop();
    stability();
    kinds();
    explain_and_errors();
    norm_line();
    program();
    deaths();
    python();
    siglists_free(L);
    if (fails) {
        fprintf(stderr, "%d check(s) failed\n", fails);
        return 1;
    }
    printf("all signature checks passed\n");
    return 0;
}
