/* similar.h - similarity search over known failures (issue 24): normalized error lines, features
 * (word tokens, word pairs, character 3..5-grams, the exception type, signature tokens) as plain
 * lists of hashed features with counts, TF-IDF weights computed over the corpus searched, cosine
 * similarity. Deterministic, in crashpack's own code: a feature is a 64-bit FNV-1a hash of its
 * text, so any store (SQLite, PostgreSQL) that keeps the (hash, count) lists gives the same
 * answers. No network, no model. Never prints or exits.
 */
#ifndef CRASHPACK_SIMILAR_H
#define CRASHPACK_SIMILAR_H
#include <stddef.h>
#include <stdint.h>

/* One feature of a document: its hash and its weighted term frequency (1 + ln count, times the
 * weight of its family). A document's list is sorted by h, each h once. */
struct sim_feat {
    uint64_t h;
    double tf;
};

/* The line normalized into out (NUL-terminated, cut at outlen): lower case, one space for each
 * run of blanks, and paths -> <path>, hex addresses and long hex ids -> <addr>, UUIDs -> <uuid>,
 * dates and times -> <time>, IPv4 addresses (and a port) -> <ip>, ranks ("rank 3", "[rank3]",
 * "local_rank=3", torchrun's "[default3]") -> <rank>, "pid 123" -> pid <pid>, other standalone
 * numbers -> <n>. Returns the length written. */
size_t sim_normalize_line(const char *line, size_t len, char *out, size_t outlen);

/* 1 when the line reads as an error line (error, exception, traceback, fail, killed, ...). */
int sim_is_error_line(const char *line, size_t len);

/* The error lines of text (all its lines when none reads as an error), the last max of them,
 * each as a pointer into text and a length. Returns how many. */
size_t sim_error_lines(const char *text, const char **lines, size_t *lens, size_t max);

/* The features of a document: its error lines (normalized, each distinct line once: the same
 * line from many ranks counts once, in any order), the exception type and the signature (either
 * may be NULL). *out is malloc()ed, sorted by hash. Returns 0, or -1 when out of memory. */
int sim_features(const char *text, const char *exc_type, const char *signature,
                 struct sim_feat **out, size_t *n);

/* A corpus: documents added, then sim_index_finish computes the document frequencies and each
 * document's norm; queries after that. */
struct sim_index;
struct sim_index *sim_index_new(void);
/* Adds a document (takes f, which must come from sim_features); its number is the order added. */
int sim_index_add(struct sim_index *ix, struct sim_feat *f, size_t n);
int sim_index_finish(struct sim_index *ix);
size_t sim_index_size(const struct sim_index *ix);
void sim_index_free(struct sim_index *ix);

struct sim_hit {
    size_t doc;   /* the document's number */
    double score; /* cosine of the TF-IDF vectors, 0..1 */
};

/* The max best documents for the query q, best first (ties: the lower number first), those with
 * a score of at least min. Returns how many. */
size_t sim_query(const struct sim_index *ix, const struct sim_feat *q, size_t nq, double min,
                 struct sim_hit *hits, size_t max);

#endif
