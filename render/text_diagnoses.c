/* text_diagnoses.c - the diagnoses in the text report, best first: each with its confidence (and
 * why it was capped), the cause it is a consequence of, its evidence, fields and actions; or a
 * plain "no known failure pattern matched" with the signature. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

/* The rules of the same cause merged into diagnosis d (its "rules" after the first), if any. */
static void merged_rules(FILE *out, const cJSON *d)
{
    const cJSON *rl = cJSON_GetObjectItem(d, "rules"), *x;
    if (cJSON_GetArraySize(rl) < 2)
        return;
    fputs(cJSON_GetArraySize(rl) > 2 ? "     also rules" : "     also rule", out);
    int k = 0;
    cJSON_ArrayForEach(x, rl) if (k++ && cJSON_IsString(x))
    {
        fputs(k > 2 ? ", " : " ", out);
        cp_text_put(out, x->valuestring);
    }
    fputs(" (the same cause", out);
    if (cp_jstr(d, "cause")) {
        fputs(": ", out);
        cp_text_put(out, cp_jstr(d, "cause"));
    }
    fputs(")\n", out);
}

void render_text_diagnoses(FILE *out, const cJSON *report)
{
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(report, "diagnoses"), *d;
    const char *ierr = cp_jstr(cJSON_GetObjectItemCaseSensitive(report, "diagnosis_info"), "error");
    fputc('\n', out);
    if (ierr) {
        fputs("diagnosis could not run: ", out);
        cp_text_put(out, ierr);
        fputc('\n', out);
        return;
    }
    if (cJSON_GetArraySize(ds) == 0) {
        const char *sig = cp_jstr(report, "signature");
        fputs("diagnosis no known failure pattern matched this crash (signature: ", out);
        cp_text_put(out, sig ? sig : "none");
        fputs(")\n", out);
        return;
    }
    fputs("diagnoses (best first)\n", out);
    int i = 0;
    cJSON_ArrayForEach(d, ds)
    {
        char conf[16];
        snprintf(conf, sizeof(conf), "%.2f", cp_jnum_or(d, "confidence", 0));
        fprintf(out, "  %d. ", ++i);
        cp_text_put(out, cp_jstr(d, "title") ? cp_jstr(d, "title") : "?");
        fprintf(out, "  [%s, confidence %s, rule ",
                cp_jstr(d, "category") ? cp_jstr(d, "category") : "?", conf);
        cp_text_put(out, cp_jstr(d, "rule") ? cp_jstr(d, "rule") : "?");
        fputs("]\n", out);
        if (cp_jstr(d, "confidence_note")) {
            fprintf(out, "     capped from %.2f: ", cp_jnum_or(d, "rule_confidence", 0));
            cp_text_put(out, cp_jstr(d, "confidence_note"));
            fputc('\n', out);
        }
        merged_rules(out, d);
        const char *co = cp_jstr(d, "consequence_of");
        if (co) {
            fputs("     likely a consequence of ", out);
            cp_text_put(out, co);
            fputc('\n', out);
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "evidence"))
        {
            fputs("     evidence: ", out);
            cp_text_put(out, cJSON_GetStringValue(e) ? cJSON_GetStringValue(e) : "");
            fputc('\n', out);
        }
        const cJSON *ef = cJSON_GetObjectItem(d, "evidence_fields");
        if (cJSON_IsObject(ef) && ef->child) {
            fputs("     fields:  ", out);
            cJSON_ArrayForEach(e, ef)
            {
                fputc(' ', out);
                cp_text_put(out, e->string ? e->string : "?");
                fputc('=', out);
                if (cJSON_IsString(e))
                    cp_text_put(out, e->valuestring);
                else if (cJSON_IsNumber(e))
                    fprintf(out, "%.15g", e->valuedouble);
                else
                    fputs(cJSON_IsTrue(e) ? "true" : cJSON_IsFalse(e) ? "false" : "null", out);
            }
            fputc('\n', out);
        }
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "actions"))
        {
            fputs("     action:   ", out);
            cp_text_put(out, cJSON_GetStringValue(e) ? cJSON_GetStringValue(e) : "");
            fputc('\n', out);
        }
    }
}
