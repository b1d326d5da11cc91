/* render_internal.h - what the renderer's files share (render/ only). */
#ifndef CRASHPACK_RENDER_INTERNAL_H
#define CRASHPACK_RENDER_INTERNAL_H

#include "render.h"

#include <stddef.h>

/* A label column of the text report: "%-10s". */
void render_label(FILE *out, const char *l);
/* n bytes as "123 B", "4.5 KiB", ... */
const char *render_human(double n, char *buf, size_t len);
/* Epoch seconds t as strftime's fmt in UTC, or `unknown` when t <= 0 or out of range. */
void render_time(double t, const char *fmt, const char *unknown, char *buf, size_t len);

/* Prints s through the terminal policy, cut at about max bytes (0: never) with "..." when it is
 * longer: at the last space of its second half, so no word or number is cut in two silently. */
void render_put_cut(FILE *out, const char *s, size_t max);

/* A group's resolution (the report's and db show's `resolution` object; not an object: nothing),
 * shown before everything else (resolution.c). */
void render_text_resolution(FILE *out, const cJSON *res);
void render_md_resolution(FILE *o, const cJSON *res);

/* The text report's sections (render_text's order). The answer first: */
void render_text_death(FILE *out, const cJSON *r);          /* text_exception.c */
void render_text_cause(FILE *out, const cJSON *r);          /* text_native.c */
void render_text_top_diagnosis(FILE *out, const cJSON *r);  /* text_diagnoses.c */
void render_text_similar(FILE *out, const cJSON *r);        /* text_similar.c */
/* the confidence under which no rule is taken as the answer (the nearest known cases are) */
#define RENDER_CONFIDENT 0.5
void render_text_exception_head(FILE *out, const cJSON *r); /* text_exception.c */
void render_text_crash_frame(FILE *out, const cJSON *r);    /* text_native.c */
void render_text_deadlocks(FILE *out, const cJSON *r);      /* text_hang.c */
void render_text_signature(FILE *out, const cJSON *r);      /* text_signature.c */
/* then the threads, the rest of the evidence, the remaining diagnoses: */
void render_text_exception(FILE *out, const cJSON *r);             /* text_exception.c */
void render_text_native(FILE *out, const cJSON *r);                /* text_native.c */
void render_text_evidence(FILE *out, const cJSON *r, int verbose); /* text_evidence.c */
void render_text_hang(FILE *out, const cJSON *r);                  /* text_hang.c */
void render_text_more_diagnoses(FILE *out, const cJSON *r);        /* text_diagnoses.c */

/* The Markdown sections (markdown.c's order), and the escapes they all use (mdesc.h). */
void render_md_hang(FILE *o, const cJSON *r);      /* md_threads.c */
void render_md_exception(FILE *o, const cJSON *r); /* md_exception.c */
void render_md_thread(FILE *o, const cJSON *r);    /* md_threads.c */
void render_md_gpu(FILE *o, const cJSON *r);       /* md_gpu.c */
void render_md_similar(FILE *o, const cJSON *r);   /* text_similar.c */
void render_md(FILE *o, const char *s);            /* prose and table cells; NULL: "-" */
void render_md_code(FILE *o, const char *s);       /* a code span */
void render_md_code_cell(FILE *o, const char *s);  /* a code span in a table cell */
/* A fenced code block's lines, kept until the block is written: the fence must be longer than any
 * backtick run in them, so a line of the bundle's cannot close it. */
#define RENDER_BLOCK_MAX 32
struct render_block {
    char *v[RENDER_BLOCK_MAX];
    int n;
};
void render_block_add(struct render_block *b, const char *s);
void render_block_write(FILE *o, struct render_block *b);
/* n malloc()ed lines v as one fenced code block (a fence longer than any run of backticks in
 * them), freed; *n becomes 0 */
void render_lines_write(FILE *o, char **v, int *n);
/* A live snapshot (crashpack snap / watch): nothing crashed, no signal */
int render_is_snapshot(const cJSON *r);

#endif
