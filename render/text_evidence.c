/* text_evidence.c - the evidence in the text report: node GPU events, Xids, the host's other GPUs,
 * nvidia-smi figures, log errors, the checkpoint verdict. Its label column is one narrower than
 * the rest, and always followed by a space. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

static void elabel(FILE *out, const char *l)
{
    fprintf(out, "%-9s ", l); /* a space even after a 10-character label */
}

static void put_s(FILE *out, const char *s)
{
    cp_text_put(out, s ? s : "?");
}

static void print_num(FILE *out, const cJSON *o, const char *k, const char *fmt)
{
    double v;
    if (cp_jnum(o, k, &v))
        fprintf(out, fmt, v);
    else
        fputs("?", out);
}

/* The node service's GPU events of this host (host context), at most 5. */
static void node_events(FILE *out, const cJSON *r)
{
    const cJSON *nev = cp_jkey(cp_jkey(r, "kernel_log"), "node_gpu_events"), *x;
    int nn = cJSON_GetArraySize(nev), j = 0;
    cJSON_ArrayForEach(x, nev)
    {
        if (j++ == 5) {
            elabel(out, "");
            fprintf(out, "... %d more\n", nn - 5);
            break;
        }
        elabel(out, j == 1 ? "node gpu" : "");
        put_s(out, cp_jstr(x, "time_utc"));
        fputs(" (host context, crashpack agent): ", out);
        put_s(out, cp_jstr(x, "line"));
        if (cp_jstr(x, "nvidia_smi")) {
            fputs(" [nvidia-smi then: ", out);
            put_s(out, cp_jstr(x, "nvidia_smi"));
            fputs("]", out);
        }
        fputs("\n", out);
    }
}

/* The Xid lines, at most 10, with the catalogue's meaning, blame and action. */
static void xids(FILE *out, const cJSON *gpu)
{
    const cJSON *x;
    int nx = cJSON_GetArraySize(cp_jkey(gpu, "xid")), i = 0;
    cJSON_ArrayForEach(x, cp_jkey(gpu, "xid"))
    {
        if (i++ == 10) {
            elabel(out, "");
            fprintf(out, "... %d more Xids\n", nx - 10);
            break;
        }
        elabel(out, i == 1 ? "xid" : "");
        print_num(out, x, "code", "Xid %.0f");
        fputs(" on ", out);
        put_s(out, cp_jstr(x, "pci") ? cp_jstr(x, "pci") : "unknown GPU");
        if (cJSON_IsTrue(cp_jkey(x, "own_gpu")))
            fputs(" (this process's GPU)", out);
        if (cJSON_IsTrue(cp_jkey(x, "own_pid")))
            fputs(" (this pid)", out);
        if (cp_jstr(x, "time_utc")) {
            fputs(" at ", out);
            put_s(out, cp_jstr(x, "time_utc"));
        }
        fputs(": ", out);
        put_s(out, cp_jstr(x, "meaning"));
        fputs(" [blame ", out);
        put_s(out, cp_jstr(x, "blame"));
        fputs(", action ", out);
        put_s(out, cp_jstr(x, "action"));
        fputs("]\n", out);
    }
}

/* The one reason for every GPU member's absence, when there is one: the host has no NVIDIA
 * driver (gpu.json's step says so). Returns that step's reason, NULL otherwise. */
static const char *no_driver(const cJSON *r)
{
    const cJSON *st;
    cJSON_ArrayForEach(st, cp_jpath(r, "capture.failed_steps"))
    {
        const char *name = cp_jstr(st, "name"), *why = cp_jstr(st, "reason");
        if (name && !strcmp(name, "gpu.json") && why && strstr(why, "no NVIDIA driver"))
            return why;
    }
    return NULL;
}

/* One line for all the GPU evidence a host without the NVIDIA driver could not have (gpu.json,
 * the process's GPUs, nvidia-smi), instead of one line each. Returns whether it was printed. */
static int gpu_absent(FILE *out, const cJSON *r)
{
    const cJSON *gpu = cp_jkey(r, "gpu");
    const char *why = no_driver(r);
    if (!why || cJSON_GetArraySize(cp_jkey(gpu, "xid")) > 0 ||
        cJSON_IsObject(cp_jkey(gpu, "nvidia_smi")))
        return 0;
    elabel(out, "gpu");
    fputs("none: ", out);
    put_s(out, why);
    fputs(" on the crashed host, so no GPU state and no nvidia-smi", out);
    const char *pg = cp_jstr(cp_jkey(gpu, "scope"), "process_gpus");
    if (pg && !strcmp(pg, "none"))
        fputs("; this process used no GPU", out);
    fputc('\n', out);
    return 1;
}

/* The host's other GPUs' events (context, newest first), whether the process had a GPU, and the
 * nvidia-smi queries that did not answer. */
static void scope(FILE *out, const cJSON *gpu)
{
    const cJSON *hc = cp_jkey(gpu, "host_context"), *x;
    if (cJSON_GetArraySize(hc) > 0) {
        elabel(out, "context");
        fputs("other GPUs of this host (not this process's cause; newest first): ", out);
        int nh = cJSON_GetArraySize(hc);
        for (int i = 0; i < nh; i++) {
            if (i == 5) {
                fprintf(out, "; ... %d more", nh - 5);
                break;
            }
            if (i)
                fputs("; ", out);
            put_s(out, cp_jstr(cJSON_GetArrayItem(hc, nh - 1 - i), "summary"));
        }
        fputc('\n', out);
    }
    const char *pg = cp_jstr(cp_jkey(gpu, "scope"), "process_gpus");
    if (pg && strcmp(pg, "known")) {
        elabel(out, "gpus");
        fputs(!strcmp(pg, "none") ? "this process used no GPU: "
                                  : "this process's GPUs are unknown: ",
              out);
        put_s(out, cp_jstr(cp_jkey(gpu, "scope"), "reason"));
        fputc('\n', out);
    }
    cJSON_ArrayForEach(x, cp_jkey(gpu, "nvidia_smi_queries"))
    {
        const char *st = cp_jstr(x, "status");
        if (st && !strcmp(st, "ok"))
            continue;
        elabel(out, "nvidia-smi");
        fputs("-i ", out);
        put_s(out, cp_jstr(x, "pci"));
        fputs(": ", out);
        put_s(out, st);
        if (cp_jstr(x, "reason")) {
            fputs(" (", out);
            put_s(out, cp_jstr(x, "reason"));
            fputc(')', out);
        }
        fputc('\n', out);
    }
}

/* One GPU of nvidia-smi's answer: memory, ECC, temperature, power, remapping, throttling. */
static void smi_gpu(FILE *out, const cJSON *g)
{
    elabel(out, "gpu");
    print_num(out, g, "index", "%.0f ");
    put_s(out, cp_jstr(g, "pci"));
    fputc(' ', out);
    put_s(out, cp_jstr(g, "name"));
    fputs(": memory ", out);
    print_num(out, g, "memory_used_mib", "%.0f");
    fputc('/', out);
    print_num(out, g, "memory_total_mib", "%.0f MiB");
    const cJSON *ecc = cp_jkey(g, "ecc");
    double d1, d2;
    if (cp_jnum(ecc, "volatile_dbe", &d1) && cp_jnum(ecc, "aggregate_dbe", &d2))
        fprintf(out, ", ECC DBE %.0f volatile / %.0f aggregate", d1, d2);
    if (cp_jnum(g, "temperature_c", &d1))
        fprintf(out, ", %.0f C", d1);
    if (cp_jnum(g, "power_w", &d1))
        fprintf(out, ", %.1f W", d1);
    if (cJSON_IsTrue(cp_jkey(cp_jkey(g, "remapped_rows"), "pending")))
        fputs(", row remap PENDING", out);
    if (cJSON_IsTrue(cp_jkey(cp_jkey(g, "remapped_rows"), "failure")))
        fputs(", row remap FAILED", out);
    if (cJSON_GetArraySize(cp_jkey(g, "throttle_reasons")) > 0) {
        const cJSON *t;
        fputs(", throttled:", out);
        cJSON_ArrayForEach(t, cp_jkey(g, "throttle_reasons"))
        {
            fputc(' ', out);
            put_s(out, cJSON_IsString(t) ? t->valuestring : "?");
        }
    }
    if (cJSON_IsTrue(cp_jkey(g, "own")))
        fputs(" (this process's GPU)", out);
    fputc('\n', out);
}

static void smi(FILE *out, const cJSON *gpu)
{
    const cJSON *smi = cp_jkey(gpu, "nvidia_smi");
    if (cJSON_IsObject(smi)) {
        const cJSON *g;
        cJSON_ArrayForEach(g, cp_jkey(smi, "gpus")) smi_gpu(out, g);
    } else if (cp_jstr(gpu, "nvidia_smi_error")) {
        elabel(out, "nvidia-smi");
        put_s(out, cp_jstr(gpu, "nvidia_smi_error"));
        fputc('\n', out);
    }
}

/* The framework error lines of the log tails, at most 10, each cut at about 160 bytes. */
static void log_errors(FILE *out, const cJSON *r)
{
    const cJSON *errs = cp_jkey(cp_jkey(r, "log"), "errors"), *e;
    int ne = cJSON_GetArraySize(errs), i = 0;
    cJSON_ArrayForEach(e, errs)
    {
        if (i++ == 10) {
            elabel(out, "");
            fprintf(out, "... %d more error lines\n", ne - 10);
            break;
        }
        elabel(out, i == 1 ? "log" : "");
        put_s(out, cp_jstr(e, "source"));
        print_num(out, e, "line", ":%.0f ");
        put_s(out, cp_jstr(e, "category"));
        fputs(": ", out);
        render_put_cut(out, cp_jstr(e, "text") ? cp_jstr(e, "text") : "", 160);
        fputc('\n', out);
    }
}

static void checkpoint(FILE *out, const cJSON *r)
{
    const cJSON *ck = cp_jkey(r, "checkpoint");
    if (!cp_jstr(ck, "path"))
        return;
    fputs("checkpoint ", out);
    put_s(out, cp_jstr(ck, "path"));
    fputs(": ", out);
    put_s(out, cp_jstr(ck, "verdict") ? cp_jstr(ck, "verdict") : "no verdict");
    if (cp_jstr(ck, "reason") && cp_jstr(ck, "reason")[0]) {
        fputs(" (", out);
        put_s(out, cp_jstr(ck, "reason"));
        fputc(')', out);
    }
    if (cp_jstr(ck, "verdict_from")) {
        fputs(strcmp(cp_jstr(ck, "verdict_from"), "recheck") ? " [checked at capture time]"
                                                             : " [re-checked here]",
              out);
    }
    fputc('\n', out);
    if (cp_jstr(ck, "newest_valid")) {
        elabel(out, "");
        fputs("newest valid: ", out);
        put_s(out, cp_jstr(ck, "newest_valid"));
        fputc('\n', out);
    }
}

void render_text_evidence(FILE *out, const cJSON *r, int verbose)
{
    const cJSON *gpu = cp_jkey(r, "gpu");
    node_events(out, r);
    xids(out, gpu);
    if (verbose || !gpu_absent(out, r)) {
        scope(out, gpu);
        smi(out, gpu);
    }
    log_errors(out, r);
    checkpoint(out, r);
}
