/* rule.h - crashpack's rule base: known failure patterns as data, matched against a report.
 *
 * A rule is one JSON object (rules/builtin/<id>.json, or a team's own rule kept in the knowledge
 * base), see docs/rules.md:
 *   {"id", "version", "title", "category", "confidence" (0..1), "diagnosis", "actions": [..],
 *    "references": [..], "consequence_of": [categories], "explains": [rule ids or categories],
 *    "when": CONDITION,
 *    "tests": {"positive": REPORT-FRAGMENT, "near_miss": REPORT-FRAGMENT}}
 * A CONDITION is {"all": [C...]}, {"any": [C...]}, {"not": C} or one leaf (signal, si_code,
 * crash_kind, abort_message, exception, frame, python_frame, xid, kernel_log, log_error, smi,
 * checkpoint, env); rule_validate() says which keys each takes.
 *
 * The rule base: the built-in rules, parsed once from the data directory
 * (cp_datapath("rules/builtin")), and a knowledge base's user rules (db/kb.h), when the caller
 * passes one, overlaid on them: a user rule with a built-in's id replaces it.
 *
 * Library code: never prints or exits; errors come back as text in (err, errlen).
 */
#ifndef CRASHPACK_RULE_H
#define CRASHPACK_RULE_H

#include "kb.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

struct rulebase;

/* Opens the rule base: built-ins from builtin_dir (NULL: the data directory's rules/builtin), plus
 * the user rules of the knowledge base kb (NULL: none; it must stay open until rulebase_close,
 * which does not close it). Returns 0, or -1 with err set (a malformed built-in file is an error:
 * it names the file). */
int rulebase_open(const char *builtin_dir, struct kb *kb, struct rulebase **out, char *err,
                  size_t errlen);
void rulebase_close(struct rulebase *rb);

/* The effective rules, ordered by id: a new array of rule objects (caller deletes). Each carries
 * "source": "builtin" | "user" (and "overrides": true when a user rule replaced a built-in). */
cJSON *rulebase_rules(struct rulebase *rb, char *err, size_t errlen);
/* The same rules, parsed once and kept by rb (valid until rulebase_close): what matching reads. */
const cJSON *rulebase_effective(struct rulebase *rb, char *err, size_t errlen);
/* One rule by id (caller deletes), or NULL. */
cJSON *rulebase_get(struct rulebase *rb, const char *id);

/* Checks a rule's shape: required keys, types, known condition leaves, regexes that compile.
 * Returns 0 or -1 with err naming the problem. */
int rule_validate(const cJSON *rule, char *err, size_t errlen);

/* The condition leaves (match.c's table, the one place a leaf is defined: its evaluation and the
 * shape of its value). rule_leaf_known: whether key names a leaf. rule_leaf_check: whether v is a
 * value that leaf takes (regexes compile, required keys are there); 0 or -1 with err. */
int rule_leaf_known(const char *key);
int rule_leaf_check(const char *key, const cJSON *v, char *err, size_t errlen);
/* Whether the regex re compiles (POSIX extended, as the leaves use it); 1, or 0 with err. */
int rule_regex_ok(const char *re, char *err, size_t errlen);

/* Evaluates a rule's condition against a report. Returns 1 match, 0 no match. When evidence is not
 * NULL, the strings that made the leaves true are appended to it (an array). */
int rule_match(const cJSON *rule, const cJSON *report, cJSON *evidence);

/* What a match rests on (issue 14, evidence scoped to the process): matched GPU leaves (xid, smi,
 * kernel_log) whose event is this process's GPU or pid (gpu_own) or only the host's (gpu_host),
 * and the process's own evidence (every other leaf). Leaves under "not" do not count. */
struct rule_scope {
    int gpu_own, gpu_host, process;
};
int rule_match_scoped(const cJSON *rule, const cJSON *report, cJSON *evidence,
                      struct rule_scope *sc);

/* Whether a rule's condition reads GPU events (an xid or smi leaf): a hardware rule, which `rules
 * test` also checks against the same event on another GPU and another pid. */
int rule_reads_gpu(const cJSON *rule);

/* The outcome of every leaf of the condition tree, in tree order, as '0'/'1' characters in buf
 * (truncated at len-1 leaves). Returns the number of leaves. Used by `rules test` to check that a
 * near-miss case differs from the positive case in exactly one condition. */
size_t rule_leaf_outcomes(const cJSON *rule, const cJSON *report, char *buf, size_t len);

/* Checks the rule's references to other rules against the rule base `all` (an array of rules):
 * every "explains" entry must be the id of a rule or the category of one, and not the rule's own
 * id. Returns 0 or -1 with err naming the unknown reference. */
int rule_check_refs(const cJSON *rule, const cJSON *all, char *err, size_t errlen);

/* Runs a rule's own tests: the positive case must match, the near-miss must not, and the two must
 * differ in exactly one leaf condition. A hardware rule (rule_reads_gpu) must also not match its
 * positive case moved to another GPU and another pid (tests.near_miss_other_gpu, or, when absent,
 * derived from the positive case). Returns 0 when they pass, -1 with err saying why. */
int rule_selftest(const cJSON *rule, char *err, size_t errlen);

/* Matches every rule of rb against the report and replaces report.diagnoses with the ranked list:
 * {rule, title, category, confidence, diagnosis, evidence[], actions[], references[],
 * consequence_of (rule id|null), evidence_fields (only when a matched log line had fields)}, causes
 * before their consequences, then by confidence. Returns the
 * number of diagnoses, or -1 with err set (report.diagnoses is then left empty). */
int rules_diagnose(struct rulebase *rb, cJSON *report, char *err, size_t errlen);

/* Convenience for the analyzer: opens the rule base (built-ins + the user rules of kb, NULL: none)
 * and diagnoses the report. Also records report.diagnosis_info {rules, user_rules, error}.
 * Returns as above. */
int diagnose(cJSON *report, struct kb *kb, char *err, size_t errlen);
/* diagnose() in two steps (the rule base can be loaded while something else runs):
 * diagnose_open() loads the built-in and user rules (NULL with err set when it cannot);
 * diagnose_with() does the rest with that (NULL: records err as diagnose() would) and closes it. */
struct rulebase *diagnose_open(struct kb *kb, char *err, size_t errlen);
int diagnose_with(cJSON *report, struct rulebase *rb, char *err, size_t errlen);

#endif
