/* listjson.h - the pieces the JSON documents of the listing verbs share (docs/cli.md): one naming
 * scheme with the report (crashpack-report/1): a `format` tag per kind of document, `signal` an
 * object {name, number}, times as epoch seconds plus an RFC 3339 twin, `bundle.path`. */
#ifndef CRASHPACK_LISTJSON_H
#define CRASHPACK_LISTJSON_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* A new document {"format": format}. */
cJSON *cp_doc_new(const char *format);

/* o.signal = {"name": name, "number": N} (number null when the name is not a known signal);
 * null when name is NULL or a placeholder older records stored for no signal ("signal 0",
 * "SIGUNKNOWN"). */
void cp_doc_signal(cJSON *o, const char *name);

/* o.key = t (epoch seconds) and o.key_utc = "YYYY-MM-DDTHH:MM:SSZ"; both null when t <= 0. */
void cp_doc_time(cJSON *o, const char *key, double t);

/* o.key = s, or null when s is NULL. */
void cp_doc_str(cJSON *o, const char *key, const char *s);

/* Prints the document to out and frees it. Returns 0, or -1 when it could not be written. */
int cp_doc_print(FILE *out, cJSON *doc);

#endif
