/* corpus.h - the known failures the similarity search looks in (issue 24), and the report's
 * `similar` part.
 *
 * The corpus is the shipped real cases, fixtures/cases/<class>/<id>.json (crashpack-case/1), read
 * from the data root (common/datadir.h: $CRASHPACK_DATA_DIR, <bindir>/../share/crashpack, the
 * source tree), each indexed by its excerpt. sim_corpus_add is the seam for the knowledge base's
 * own crashes (their output, exception type and signature, with their resolution as the cause).
 * Never prints or exits.
 */
#ifndef CRASHPACK_CORPUS_H
#define CRASHPACK_CORPUS_H
#include <stddef.h>

#include <cjson/cJSON.h>

struct sim_corpus;

/* Loads the shipped cases, but those whose id is in the comma-separated list exclude (NULL: none;
 * the tests remove a case from the corpus with it). NULL with err set when the directory cannot
 * be read or a case is malformed. */
struct sim_corpus *sim_corpus_load(const char *exclude, char *err, size_t errlen);

/* Adds a document: meta (taken; its "case", "class", "category", "established_cause",
 * "source_url" are copied to a hit) and its text, exception type and signature (NULL for none).
 * Call before the first query. Returns 0 or -1. */
int sim_corpus_add(struct sim_corpus *c, cJSON *meta, const char *text, const char *exc_type,
                   const char *signature);
size_t sim_corpus_size(const struct sim_corpus *c);
void sim_corpus_free(struct sim_corpus *c);

/* The exception type a text names last ("RuntimeError", "torch.OutOfMemoryError"), at the
 * start of a line or after a rank prefix, into buf; NULL when none. */
const char *sim_exception_type(const char *text, char *buf, size_t len);

/* The minimum score a case needs to be shown, and how many are shown. */
#define SIM_MIN_SCORE 0.25
#define SIM_SHOW 3
#define SIM_TIES 16 /* similar_info.nearest_ties: at most this many */

/* The report's `similar` (the nearest cases, best first, at most SIM_SHOW with a score of at least
 * SIM_MIN_SCORE) and `similar_info` (the corpus's size, the error lines the search read, the
 * nearest case even under the minimum and the ids of those as near, or the error), for the crash's
 * output text (NULL: the report's output.last_lines) and its log errors. c NULL: loads the corpus
 * (exclusion from $CRASHPACK_SIMILAR_EXCLUDE). Returns 0, or -1 when the search could not run
 * (similar_info.error says why). */
int similar_report(cJSON *r, const char *text, struct sim_corpus *c);

#endif
