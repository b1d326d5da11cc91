/* md_gpu.c - the GPU state in the ticket Markdown: the Xid table and lines, the host's other GPUs
 * (context), whether the process had a GPU, the nvidia-smi queries and figures at capture. */
#include "render_internal.h"
#include "jpath.h"

#include <string.h>

/* The Xid table (at most 20) and the lines themselves in a code block. */
static void xid_table(FILE *o, const cJSON *x)
{
    const cJSON *e;
    fputs("| time | Xid | PCI | this process's GPU | meaning | blame | action |\n"
          "|---|---|---|---|---|---|---|\n",
          o);
    int i = 0;
    cJSON_ArrayForEach(e, x)
    {
        if (i++ >= 20)
            break;
        double c = 0;
        cp_jnum_at(e, "code", &c);
        fputs("| ", o);
        render_md(o, cp_jstr_ne_at(e, "time_utc"));
        fprintf(o, " | %.0f | ", c);
        render_md(o, cp_jstr_ne_at(e, "pci"));
        fprintf(o, " | %s | ",
                cJSON_IsTrue(cp_jpath(e, "own_gpu"))    ? "yes"
                : cJSON_IsFalse(cp_jpath(e, "own_gpu")) ? "no"
                                                        : "?");
        render_md(o, cp_jstr_ne_at(e, "meaning"));
        fputs(" | ", o);
        render_md(o, cp_jstr_ne_at(e, "blame"));
        fputs(" | ", o);
        render_md(o, cp_jstr_ne_at(e, "action"));
        fputs(" |\n", o);
    }
    fputs("\nXid lines:\n\n", o);
    struct render_block b = {.n = 0};
    i = 0;
    cJSON_ArrayForEach(e, x)
    {
        if (i++ >= 20)
            break;
        render_block_add(&b, cp_jstr_ne_at(e, "line") ? cp_jstr_ne_at(e, "line")
                                                      : cp_jstr_ne_at(e, "text"));
    }
    render_block_write(o, &b);
    fputc('\n', o);
}

/* The host's other GPUs (context), whether this process had a GPU, the nvidia-smi queries. */
static void scope(FILE *o, const cJSON *r)
{
    const cJSON *hc = cp_jpath(r, "gpu.host_context"), *e;
    if (cJSON_GetArraySize(hc) > 0) {
        fputs("Other GPUs of this host (context, not this process's cause): ", o);
        int k = 0;
        cJSON_ArrayForEach(e, hc)
        {
            if (k++ >= 10)
                break;
            if (k > 1)
                fputs("; ", o);
            render_md(o, cp_jstr_ne_at(e, "summary"));
        }
        fputs(".\n\n", o);
    }
    const char *pg = cp_jstr_ne_at(r, "gpu.scope.process_gpus");
    if (pg && strcmp(pg, "known")) {
        fputs(!strcmp(pg, "none") ? "This process used no GPU: "
                                  : "This process's GPUs are unknown: ",
              o);
        render_md(o, cp_jstr_ne_at(r, "gpu.scope.reason"));
        fputs(".\n\n", o);
    }
    cJSON_ArrayForEach(e, cp_jpath(r, "gpu.nvidia_smi_queries"))
    {
        fputs("- nvidia-smi -i ", o);
        render_md_code(o, cp_jstr_ne_at(e, "pci"));
        fputs(": ", o);
        render_md(o, cp_jstr_ne_at(e, "status"));
        if (cp_jstr_ne_at(e, "reason")) {
            fputs(" (", o);
            render_md(o, cp_jstr_ne_at(e, "reason"));
            fputc(')', o);
        }
        fputc('\n', o);
    }
    if (cJSON_GetArraySize(cp_jpath(r, "gpu.nvidia_smi_queries")) > 0)
        fputc('\n', o);
}

/* A count or '?' when unknown (-1). */
static void count_or_unknown(FILE *o, double v)
{
    if (v >= 0)
        fprintf(o, "%.0f", v);
    else
        fputc('?', o);
}

/* One row of the nvidia-smi table. */
static void smi_row(FILE *o, const cJSON *e)
{
    double idx = -1, mu = -1, mt = -1, pct = -1, vd = -1, ad = -1, tc = -1, pw = -1;
    cp_jnum_at(e, "index", &idx);
    cp_jnum_at(e, "memory_used_mib", &mu);
    cp_jnum_at(e, "memory_total_mib", &mt);
    cp_jnum_at(e, "memory_used_pct", &pct);
    cp_jnum_at(e, "ecc.volatile_dbe", &vd);
    cp_jnum_at(e, "ecc.aggregate_dbe", &ad);
    cp_jnum_at(e, "temperature_c", &tc);
    cp_jnum_at(e, "power_w", &pw);
    fprintf(o, "| %.0f | ", idx);
    render_md(o, cp_jstr_ne_at(e, "pci"));
    fprintf(o, " | %s | ", cJSON_IsTrue(cp_jpath(e, "own")) ? "yes" : "");
    if (mu >= 0 && mt > 0)
        fprintf(o, "%.0f / %.0f MiB (%.0f%%)", mu, mt, pct >= 0 ? pct : mu * 100 / mt);
    else
        fputs("?", o);
    fputs(" | ", o);
    count_or_unknown(o, vd);
    fputc('/', o);
    count_or_unknown(o, ad);
    fputs(" | ", o);
    fprintf(o, "%s%s | ", cJSON_IsTrue(cp_jpath(e, "remapped_rows.pending")) ? "PENDING" : "no",
            cJSON_IsTrue(cp_jpath(e, "remapped_rows.failure")) ? ", FAILURE" : "");
    if (tc >= 0)
        fprintf(o, "%.0f C", tc);
    fputs(" | ", o);
    if (pw >= 0)
        fprintf(o, "%.0f W", pw);
    fputs(" | ", o);
    const cJSON *th;
    int first = 1;
    cJSON_ArrayForEach(th, cp_jpath(e, "throttle_reasons"))
    {
        if (!first)
            fputs(", ", o);
        first = 0;
        render_md(o, cJSON_GetStringValue(th));
    }
    fputs(" |\n", o);
}

void render_md_gpu(FILE *o, const cJSON *r)
{
    fputs("\n## GPU state\n\n", o);
    const cJSON *x = cp_jpath(r, "gpu.xid"), *e;
    if (cJSON_GetArraySize(x) > 0)
        xid_table(o, x);
    else
        fputs("No Xid in the kernel log captured with the crash.\n\n", o);
    scope(o, r);
    const cJSON *smi = cp_jpath(r, "gpu.nvidia_smi");
    if (!cJSON_IsObject(smi)) {
        fputs("nvidia-smi: ", o);
        render_md(o, cp_jstr_ne_at(r, "gpu.nvidia_smi_error")
                         ? cp_jstr_ne_at(r, "gpu.nvidia_smi_error")
                         : "not captured");
        fputs(".\n", o);
        return;
    }
    fputs("nvidia-smi at capture (driver ", o);
    render_md(o, cp_jstr_ne_at(smi, "driver_version"));
    fputs(", CUDA ", o);
    render_md(o, cp_jstr_ne_at(smi, "cuda_version"));
    fputs("):\n\n| GPU | PCI | own | memory used | ECC DBE (volatile/aggregate) | remap "
          "pending/failure | temp | power | throttle |\n"
          "|---|---|---|---|---|---|---|---|---|\n",
          o);
    cJSON_ArrayForEach(e, cp_jpath(smi, "gpus")) smi_row(o, e);
}
