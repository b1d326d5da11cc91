/* logerr.h - framework error lines in a log tail (the bundle's logs/stderr.tail, logs/stdout.tail).
 *
 * The patterns are data: rules/logs/patterns.json, POSIX extended regexes (regcomp) matched line by
 * line, first match wins, each with a category (cuda_oom, nccl_timeout, ...), a finer kind, and
 * field extractors (OOM "Tried to allocate" figures in MiB, NCCL op / seq / timeout, ...). Lines
 * are cut at LOGERR_LINE_MAX bytes before matching; invalid UTF-8 is replaced in the text kept.
 * Library code: never prints, never exits.
 */
#ifndef CRASHPACK_LOGERR_H
#define CRASHPACK_LOGERR_H
#include <cjson/cJSON.h>
#include <stddef.h>

#define LOGERR_LINE_MAX 8192  /* bytes of a line that are matched */
#define LOGERR_TEXT_MAX 1000  /* bytes of a line kept in the report */

struct logerr_set;

/* Loads rules/logs/patterns.json (cp_datapath). NULL with a reason in err. */
struct logerr_set *logerr_load(char *err, size_t errlen);
/* The same from a JSON text (tests, user pattern files). */
struct logerr_set *logerr_load_json(const char *json, size_t len, char *err, size_t errlen);
void logerr_free(struct logerr_set *s);

/* Scans `text` (len bytes, a log tail) and appends to `out` one object per matching line:
 * {text, category, kind, pattern, line (1-based), source, fields{}}. At most `max` are added;
 * returns how many lines matched in all (may be more than were added). */
size_t logerr_scan(const struct logerr_set *s, const char *text, size_t len, const char *source,
                   cJSON *out, size_t max);

/* Matches one line; the category of the first matching pattern or NULL (kind, when non-NULL,
 * gets the pattern's kind or NULL). */
const char *logerr_match_line(const struct logerr_set *s, const char *line, const char **kind);

/* Fills in what the core analysis could not recover from a log tail (text, len bytes, the bundle
 * member `source`): cause.exception.what, when the exception's type is known and its what() is not,
 * from the "terminate called after throwing an instance of 'TYPE'" / "what():  TEXT" lines that
 * libstdc++ prints (what_source "log", what_log {source, line}); and cause.abort_message of a
 * SIGABRT, when the core had none, from the last glibc abort message of the log (an assertion, a
 * fortify check, malloc's checks; abort_message_source "log"). Called per log tail; the first tail
 * that has it fills it in. */
void logerr_fill_cause(cJSON *report, const char *text, size_t len, const char *source);

/* Copies s[0..len) into dst (dsz bytes, always terminated) as valid UTF-8: invalid bytes become
 * U+FFFD, NUL and C0 controls but tab (and newline when keep_nl) become spaces. Cut to fit, never
 * inside a sequence. */
void logerr_clean_utf8(char *dst, size_t dsz, const char *s, size_t len, int keep_nl);

#endif
