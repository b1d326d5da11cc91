/* text_similar.c - the nearest known failures in the text report (report.similar, issue 24):
 * beside a confident diagnosis, one "looks like:" line as supporting evidence; when no rule is
 * confident (no diagnosis, or the top one under RENDER_CONFIDENT), the honest silence: no known
 * failure pattern matched, the error lines the search read, and the nearest known cases. */
#include "render_internal.h"
#include "jpath.h"
#include "utf8.h"

#include <string.h>

/* "<cause> (case X, 0.83, <url>)" of one similar case. */
static void one_case(FILE *out, const cJSON *s)
{
    cp_text_put(out, cp_jstr(s, "established_cause") ? cp_jstr(s, "established_cause") : "?");
    fputs(" (case ", out);
    cp_text_put(out, cp_jstr(s, "case") ? cp_jstr(s, "case") : "?");
    fprintf(out, ", %.2f", cp_jnum_or(s, "score", 0));
    if (cp_jstr(s, "source_url") && *cp_jstr(s, "source_url")) {
        fputs(", ", out);
        cp_text_put(out, cp_jstr(s, "source_url"));
    }
    fputc(')', out);
}

/* "looks like: <the nearest> (...), N similar cases", when there is one. */
static void looks_like(FILE *out, const cJSON *sim)
{
    int n = cJSON_GetArraySize(sim);
    if (!n)
        return;
    fputs("looks like: ", out);
    one_case(out, cJSON_GetArrayItem(sim, 0));
    fprintf(out, ", %d similar case%s\n", n, n == 1 ? "" : "s");
}

/* 1 when a diagnosis is there with a confidence of RENDER_CONFIDENT or more. */
static int confident(const cJSON *r, double *top)
{
    const cJSON *d = cJSON_GetArrayItem(cp_jpath(r, "diagnoses"), 0);
    *top = d ? cp_jnum_or(d, "confidence", 0) : 0;
    return d && *top >= RENDER_CONFIDENT;
}

static void silence(FILE *out, const cJSON *r, double top)
{
    const cJSON *info = cp_jpath(r, "similar_info"), *sim = cp_jpath(r, "similar"), *e;
    if (cJSON_GetArraySize(cp_jpath(r, "diagnoses")))
        fprintf(out,
                "          no known failure pattern matched with confidence (the best rule: "
                "%.2f, under %.2f)\n",
                top, RENDER_CONFIDENT);
    if (!cJSON_GetArraySize(cp_jpath(info, "error_lines")) && !cJSON_GetArraySize(sim))
        return; /* no output to compare (a core without a log): nothing more to say */
    if (cJSON_GetArraySize(cp_jpath(info, "error_lines"))) {
        fputs("          error lines found:\n", out);
        cJSON_ArrayForEach(e, cp_jpath(info, "error_lines")) if (cJSON_IsString(e))
        {
            fputs("            ", out);
            render_put_cut(out, e->valuestring, 160);
            fputc('\n', out);
        }
    }
    looks_like(out, sim);
    if (cJSON_GetArraySize(sim)) {
        fputs("          nearest known cases:\n", out);
        cJSON_ArrayForEach(e, sim)
        {
            fputs("            ", out);
            one_case(out, e);
            fputs(" [", out);
            cp_text_put(out, cp_jstr(e, "category") ? cp_jstr(e, "category") : "?");
            fputs("]\n", out);
        }
    } else if (cp_jstr(info, "error")) {
        fputs("          nearest known cases: the search could not run: ", out);
        cp_text_put(out, cp_jstr(info, "error"));
        fputc('\n', out);
    } else if (info) {
        fprintf(out, "          no similar known case (none scores %.2f or more",
                cp_jnum_or(info, "min_score", 0));
        if (cp_jpath(info, "nearest")) {
            fputs("; the nearest: ", out);
            one_case(out, cp_jpath(info, "nearest"));
        }
        fputs(")\n", out);
    }
}

void render_text_similar(FILE *out, const cJSON *r)
{
    double top = 0;
    if (cp_jstr_at(r, "diagnosis_info.error") || !cp_jpath(r, "similar_info"))
        return;
    if (confident(r, &top))
        looks_like(out, cp_jpath(r, "similar"));
    else
        silence(out, r, top);
}

/* Markdown: "## Similar known failures", a table of report.similar, or the search's error, and
 * the error lines when no rule is confident. */
void render_md_similar(FILE *o, const cJSON *r)
{
    const cJSON *info = cp_jpath(r, "similar_info"), *sim = cp_jpath(r, "similar"), *e;
    double top = 0;
    int sure = confident(r, &top);
    /* a confident rule with no precedent, or no output to compare: nothing to add */
    if (!info ||
        (!cJSON_GetArraySize(sim) &&
         (sure || (!cJSON_GetArraySize(cp_jpath(info, "error_lines")) && !cp_jstr(info, "error")))))
        return;
    fputs("\n## Similar known failures\n\n", o);
    if (!sure) {
        fputs("No known failure pattern matched with confidence; the nearest known cases are the "
              "best guess.\n\n",
              o);
        if (cJSON_GetArraySize(cp_jpath(info, "error_lines"))) {
            fputs("Error lines found:\n\n", o);
            cJSON_ArrayForEach(e, cp_jpath(info, "error_lines")) if (cJSON_IsString(e))
            {
                fputs("- ", o);
                render_md_code(o, e->valuestring);
                fputc('\n', o);
            }
            fputc('\n', o);
        }
    }
    if (cp_jstr(info, "error")) {
        fputs("The search could not run: ", o);
        render_md(o, cp_jstr(info, "error"));
        fputs(".\n", o);
        return;
    }
    if (!cJSON_GetArraySize(sim)) {
        fprintf(o, "None scores %.2f or more.\n", cp_jnum_or(info, "min_score", 0));
        return;
    }
    fputs("| Case | Score | Category | Established cause | Source |\n|---|---|---|---|---|\n", o);
    cJSON_ArrayForEach(e, sim)
    {
        fputs("| ", o);
        render_md_code_cell(o, cp_jstr(e, "case"));
        fprintf(o, " | %.2f | ", cp_jnum_or(e, "score", 0));
        render_md(o, cp_jstr(e, "category"));
        fputs(" | ", o);
        render_md(o, cp_jstr(e, "established_cause"));
        fputs(" | ", o);
        render_md(o, cp_jstr(e, "source_url"));
        fputs(" |\n", o);
    }
}
