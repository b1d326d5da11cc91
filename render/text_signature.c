/* text_signature.c - the signature lines of the text report: the signature (or why there is
 * none), the fingerprint with the crash kind and the signature lists' version, and with --explain
 * which rule kept or skipped each frame of the crashed thread (signature_info.explain[]). */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

static void print_explain(FILE *out, const cJSON *ex)
{
    const cJSON *e;
    int run_from = -1, run_to = -1;
    const char *run_why = NULL;
    cJSON_ArrayForEach(e, ex)
    {
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(e, "frame");
        int idx = cJSON_IsNumber(fr) ? (int)fr->valuedouble : -1;
        const char *action = cp_jstr(e, "action"), *name = cp_jstr(e, "name"),
                   *rule = cp_jstr(e, "rule");
        if (action && !strcmp(action, "unused")) {
            if (run_from < 0) {
                run_from = idx;
                run_why = rule;
            }
            run_to = idx;
            continue;
        }
        fprintf(out, "            #%-3d %-9s ", idx, action ? action : "?");
        cp_text_put(out, name ? name : "?");
        if (rule) {
            fputs("  (", out);
            cp_text_put(out, rule);
            fputc(')', out);
        }
        fputc('\n', out);
    }
    if (run_from >= 0) {
        if (run_to > run_from)
            fprintf(out, "            #%d-#%d unused", run_from, run_to);
        else
            fprintf(out, "            #%d unused", run_from);
        if (run_why) {
            fputs(" (", out);
            cp_text_put(out, run_why);
            fputc(')', out);
        }
        fputc('\n', out);
    }
}

void render_text_signature(FILE *out, const cJSON *r)
{
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(r, "signature_info");
    if (!cJSON_IsObject(info))
        return;
    const char *sig = cp_jstr(r, "signature"), *fp = cp_jstr(r, "fingerprint");
    const char *kind = cp_jstr(info, "kind"), *ver = cp_jstr(info, "version"),
               *err = cp_jstr(info, "error");
    fprintf(out, "%-10s", "signature");
    if (sig) {
        cp_text_put(out, sig);
    } else {
        fputs("none: ", out);
        cp_text_put(out, err ? err : "?");
    }
    fputc('\n', out);
    if (fp) {
        fprintf(out, "%-10s", "");
        fputs("fingerprint ", out);
        cp_text_put(out, fp);
        fputs(" (", out);
        cp_text_put(out, kind ? kind : "?");
        fputs("; signature lists version ", out);
        cp_text_put(out, ver ? ver : "?");
        fputs(")\n", out);
    }
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(info, "explain");
    if (cJSON_IsArray(ex)) {
        fprintf(out, "%-10s", "");
        fputs("how each frame of the crashed thread was used (rules/signature/*.txt):\n", out);
        print_explain(out, ex);
    }
}
