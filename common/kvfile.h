/* kvfile.h - the small line-based data files under rules/ that are tables, not rules
 * (rules/hang/wait-frames.txt, rules/signature/crash-kinds.txt): one `KEYWORD VALUE` a line.
 *
 * Syntax: blank lines and lines starting with '#' are skipped; otherwise a line is a keyword (a
 * run of non-blank characters), blanks, and the value: the rest of the line without surrounding
 * blanks. A value written in double quotes ("free(): ") keeps its blanks; the quotes go (there are
 * no escapes). Every keyword must be one the caller names, and every value non-empty.
 *
 * The file is read through cp_data_read (datadir.h) from the data root. Never prints or exits. */
#ifndef CRASHPACK_KVFILE_H
#define CRASHPACK_KVFILE_H
#include <stddef.h>

struct cp_kvline {
    const char *key; /* the caller's keys[] entry: compare with strcmp or by pointer */
    char *value;     /* into the file's buffer; the caller may split it in place */
    int line;        /* 1-based, for the caller's messages */
};

struct cp_kvfile {
    char path[4096]; /* the full path read, for messages */
    struct cp_kvline *l;
    size_t n;
    char *buf; /* owned */
};

/* Reads and splits the data file `rel` (at most max bytes). keys: the keywords allowed, NULL
 * terminated. 0, or -1 with err naming the file (and line) and what is wrong; f is then empty.
 * what names the file in the messages about the data root ("wait-frame table"). */
int cp_kvfile_load(const char *rel, const char *what, size_t max, const char *const *keys,
                   struct cp_kvfile *f, char *err, size_t errlen);
void cp_kvfile_free(struct cp_kvfile *f);

/* The values of the lines from..to-1 (indexes into f->l; to past f->n means the end) whose
 * keyword is key, in file order, as a malloc()ed NULL-terminated array (the strings stay in f),
 * or NULL when out of memory. *count (may be NULL) gets their number. */
const char **cp_kvfile_values(const struct cp_kvfile *f, const char *key, size_t from, size_t to,
                              size_t *count);

#endif
