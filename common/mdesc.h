/* mdesc.h - escaping untrusted text for Markdown and HTML (the one place that does it).
 *
 * Every string a report takes from a bundle (exe, comm, hostname, kernel release, cmdline, frame
 * function and file names, log lines, rule evidence...) is untrusted: a container's root chooses its
 * hostname, a process its name. Markdown writers print such strings only through these functions,
 * so that a ticket shows them as text: no raw HTML (<img onerror=...>, <script>), no links or
 * images ([x](url), ![x](url), bare http:// autolinks), no emphasis or code that changes the
 * structure, no table cells split by '|', no heading/list/quote marker at a line start, no line
 * breaks. Later dashboards that write HTML use cp_html_escape().
 *
 * All functions write to the FILE * the caller passes; a NULL string prints `null_text` (or "?"
 * in a code span). Control characters (C0, DEL) become spaces. Library code: never prints by name,
 * never exits.
 */
#ifndef CRASHPACK_MDESC_H
#define CRASHPACK_MDESC_H

#include <stdio.h>

/* Markdown text, in a paragraph, a list item, a heading or a table cell (a table cell is the same
 * escape: '|' is always escaped). HTML's < > & become entities; Markdown punctuation that could
 * start a link, image, emphasis, code span or HTML is backslash-escaped; a '#', '-', '+', '>' or
 * "N." at the very start is escaped too (the caller may place the string at a line start). */
void cp_md_text(FILE *o, const char *s, const char *null_text);

/* An inline code span: `s` with a fence one backtick longer than the longest backtick run in s
 * (and a space inside the fence when s starts or ends with a backtick), so the content can never
 * close it. Inside a code span nothing else is interpreted by Markdown renderers. */
void cp_md_code(FILE *o, const char *s);

/* The same code span inside a table cell: GFM splits a table row at every '|' that is not
 * backslash-escaped, code spans included, so each '|' of s is written as "\|" (which GFM shows as
 * '|' inside the cell's code span). */
void cp_md_code_cell(FILE *o, const char *s);

/* The fence length (>= 3) a fenced code block needs so that none of its lines can close it: one
 * more than the longest backtick run in any of the n lines. */
int cp_md_fence_len(const char *const *lines, int n);

/* One line inside a fenced code block (control characters -> spaces, no newline written). */
void cp_md_block_line(FILE *o, const char *s);

/* HTML text or an attribute value in double quotes: & < > " ' as entities, control characters
 * as spaces. For the HTML of later dashboards. */
void cp_html_escape(FILE *o, const char *s);

#endif
