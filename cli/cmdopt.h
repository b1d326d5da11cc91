/* cmdopt.h - the one command-line convention of every crashpack verb and sub-verb (command layer
 * only; docs/cli.md): getopt_long underneath, so `--opt=value` and `--opt value` both work and
 * options and arguments mix; -h/--help on every verb; every error is one line on stderr that names
 * the bad option or value and says what would be accepted, and the verb exits CP_EXIT_USAGE. */
#ifndef CRASHPACK_CMDOPT_H
#define CRASHPACK_CMDOPT_H

#include "exitcodes.h"

#include <getopt.h>
#include <stdio.h>

/* Every verb's table ends with these two entries. */
#define CP_OPT_HELP {"help", no_argument, 0, 'h'}
#define CP_OPT_END {0, 0, 0, 0}

/* Copies the entries of `all` named in `names` (space-separated long names), then CP_OPT_HELP and
 * CP_OPT_END, into out (cap entries): one sub-verb's options out of its verb's table. A short
 * option in cp_opts.shorts counts only while an entry of the table has it as its val. */
void cp_opt_subset(const struct option *all, const char *names, struct option *out, int cap);

/* One sub-verb of `crashpack rules` or `crashpack db`: its options (names in the verb's table),
 * its synopsis and description for --help, how many arguments it takes (max -1: any), and the
 * function that runs it (given the verb's parsed options; returns the exit status). The verb's
 * table is the one place that names a sub-verb: parsing, help and dispatch all read it. */
struct cp_subverb {
    const char *name, *opts, *synopsis, *help;
    int min_args, max_args;
    const char *args_name;
    int (*run)(void *opts);
};

/* The sub-verb `name` of table sv (n entries), or NULL after the one-line error naming it and
 * the accepted ones (verb: "crashpack db"). */
const struct cp_subverb *cp_subverb_find(const char *verb, const struct cp_subverb *sv, int n,
                                         const char *name);

/* Prints "usage: VERB NAME SYNOPSIS" and the description (`footer` after it, may be NULL). */
void cp_subverb_usage(FILE *out, const char *verb, const struct cp_subverb *s, const char *footer);

/* One parse of one verb's arguments. */
struct cp_opts {
    const char *verb;            /* "crashpack db list": the start of every message */
    const char *shorts;          /* getopt short options ("c:o:q"); -h is always added */
    const struct option *longs;  /* getopt_long's table, ending in CP_OPT_HELP, CP_OPT_END */
    int in_order;                /* 1: options end at the first argument (watch's CMD ARG...) */
    int argc;
    char **argv;                 /* argv[0] is the verb itself */
    int started;
};

/* The next option: its `val` (optarg holds its value), 'h' for -h/--help, -1 after the last
 * option (the arguments are then argv[optind..argc)), or '?' after printing the one-line error
 * (the caller returns CP_EXIT_USAGE). */
int cp_getopt(struct cp_opts *p);

/* A one-line usage error, "VERB: MESSAGE"; returns CP_EXIT_USAGE. */
int cp_usage_error(const struct cp_opts *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The whole number `v` of option `opt`, from min to max. Returns 0, or prints the one-line error
 * naming the value and returns -1. */
int cp_opt_num(const struct cp_opts *p, const char *opt, const char *v, long long min, long long max,
               long long *out);

/* The time `v` of option `opt` (cp_parse_time's forms) as seconds since the epoch. Returns 0, or
 * prints the one-line error naming the value and the accepted forms and returns -1. */
int cp_opt_time(const struct cp_opts *p, const char *opt, const char *v, double *out);

/* The arguments left after the options: between min and max of them (max -1: any number).
 * Returns 0, or prints the one-line error and returns -1. */
int cp_opt_args(const struct cp_opts *p, int min, int max, const char *what);

#endif
