/* text_diagnoses.c - the diagnoses in the text report, best first: each with its confidence (and
 * why it was capped), the cause it is a consequence of, its evidence, fields and actions; or a
 * plain "no known failure pattern matched" with the signature. `analyze` shows the first at the
 * top of its answer (render_text_top_diagnosis: its first action only) and the rest at the end
 * (render_text_more_diagnoses); `rules match` shows them all in one list (render_text_diagnoses).
 */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

/* The rules of the same cause merged into diagnosis d (its "rules" after the first), if any. */
static void merged_rules(FILE *out, const cJSON *d, const char *ind)
{
    const cJSON *rl = cJSON_GetObjectItem(d, "rules"), *x;
    if (cJSON_GetArraySize(rl) < 2)
        return;
    fputs(ind, out);
    fputs(cJSON_GetArraySize(rl) > 2 ? "also rules" : "also rule", out);
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

/* "Title  [category, confidence 0.93, rule id]" */
static void title_line(FILE *out, const cJSON *d)
{
    char conf[16];
    snprintf(conf, sizeof(conf), "%.2f", cp_jnum_or(d, "confidence", 0));
    cp_text_put(out, cp_jstr(d, "title") ? cp_jstr(d, "title") : "?");
    fprintf(out, "  [%s, confidence %s, rule ",
            cp_jstr(d, "category") ? cp_jstr(d, "category") : "?", conf);
    cp_text_put(out, cp_jstr(d, "rule") ? cp_jstr(d, "rule") : "?");
    fputs("]\n", out);
}

static void fields(FILE *out, const cJSON *d, const char *ind)
{
    const cJSON *ef = cJSON_GetObjectItem(d, "evidence_fields"), *e;
    if (!cJSON_IsObject(ef) || !ef->child)
        return;
    fprintf(out, "%sfields:  ", ind);
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

/* Actions from..to-1 of d (to < 0: all). */
static void actions(FILE *out, const cJSON *d, const char *ind, int from, int to)
{
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "actions"))
    {
        if (i >= from && (to < 0 || i < to)) {
            fprintf(out, "%saction:   ", ind);
            cp_text_put(out, cJSON_GetStringValue(e) ? cJSON_GetStringValue(e) : "");
            fputc('\n', out);
        }
        i++;
    }
}

/* Everything under the title line but the actions. */
static void body(FILE *out, const cJSON *d, const char *ind)
{
    if (cp_jstr(d, "confidence_note")) {
        fprintf(out, "%scapped from %.2f: ", ind, cp_jnum_or(d, "rule_confidence", 0));
        cp_text_put(out, cp_jstr(d, "confidence_note"));
        fputc('\n', out);
    }
    merged_rules(out, d, ind);
    const char *co = cp_jstr(d, "consequence_of");
    if (co) {
        fprintf(out, "%slikely a consequence of ", ind);
        cp_text_put(out, co);
        fputc('\n', out);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "evidence"))
    {
        fprintf(out, "%sevidence: ", ind);
        cp_text_put(out, cJSON_GetStringValue(e) ? cJSON_GetStringValue(e) : "");
        fputc('\n', out);
    }
    fields(out, d, ind);
}

/* Diagnoses from index `from` on, numbered from 1, each whole. */
static void list(FILE *out, const cJSON *ds, int from)
{
    const cJSON *d;
    int i = 0;
    cJSON_ArrayForEach(d, ds)
    {
        if (i++ < from)
            continue;
        fprintf(out, "  %d. ", i);
        title_line(out, d);
        body(out, d, "     ");
        actions(out, d, "     ", 0, -1);
    }
}

/* 1 when there is no diagnosis to list: says why (could not run, nothing matched) on a line of
 * its own, labelled `diagnosis`. */
static int none(FILE *out, const cJSON *report)
{
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(report, "diagnoses");
    const char *ierr = cp_jstr(cJSON_GetObjectItemCaseSensitive(report, "diagnosis_info"), "error");
    if (ierr) {
        fputs("diagnosis could not run: ", out);
        cp_text_put(out, ierr);
        fputc('\n', out);
        return 1;
    }
    if (cJSON_GetArraySize(ds) == 0) {
        const char *sig = cp_jstr(report, "signature");
        fputs("diagnosis no known failure pattern matched this crash (signature: ", out);
        cp_text_put(out, sig ? sig : "none");
        fputs(")\n", out);
        return 1;
    }
    return 0;
}

void render_text_diagnoses(FILE *out, const cJSON *report)
{
    fputc('\n', out);
    if (none(out, report))
        return;
    fputs("diagnoses (best first)\n", out);
    list(out, cJSON_GetObjectItemCaseSensitive(report, "diagnoses"), 0);
}

void render_text_top_diagnosis(FILE *out, const cJSON *report)
{
    if (none(out, report))
        return;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(report, "diagnoses");
    const cJSON *d = cJSON_GetArrayItem(ds, 0);
    render_label(out, "diagnosis");
    title_line(out, d);
    body(out, d, "          ");
    actions(out, d, "          ", 0, 1);
    int more = cJSON_GetArraySize(cJSON_GetObjectItem(d, "actions")) - 1;
    if (more > 0)
        fprintf(out, "          (%d more action%s at the end)\n", more, more == 1 ? "" : "s");
    if (cJSON_GetArraySize(ds) > 1)
        fprintf(out, "          (%d other diagnos%s at the end)\n", cJSON_GetArraySize(ds) - 1,
                cJSON_GetArraySize(ds) == 2 ? "is" : "es");
}

void render_text_more_diagnoses(FILE *out, const cJSON *report)
{
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(report, "diagnoses");
    if (cp_jstr(cJSON_GetObjectItemCaseSensitive(report, "diagnosis_info"), "error") ||
        cJSON_GetArraySize(ds) == 0)
        return;
    const cJSON *d = cJSON_GetArrayItem(ds, 0);
    if (cJSON_GetArraySize(cJSON_GetObjectItem(d, "actions")) > 1) {
        fputs("\nmore actions for the diagnosis at the top (", out);
        cp_text_put(out, cp_jstr(d, "rule") ? cp_jstr(d, "rule") : "?");
        fputs(")\n", out);
        actions(out, d, "     ", 1, -1);
    }
    if (cJSON_GetArraySize(ds) > 1) {
        fputs("\nother diagnoses (best first)\n", out);
        list(out, ds, 1);
    }
}
