/* exitcodes.h - the exit status of every crashpack verb, defined once (docs/cli.md says the same).
 *
 *   0  CP_EXIT_OK        done; nothing wrong found
 *   1  CP_EXIT_PROBLEM   a problem found or a partial result: a partial bundle, an invalid
 *                        checkpoint, a rule test that failed, a handler taken over, an error
 *                        while doing the work (what could be done is still printed)
 *   2  CP_EXIT_USAGE     usage: an unknown option, a bad value, a missing or extra argument
 *   3  CP_EXIT_NOTFOUND  no such thing: a missing knowledge base, an unknown crash id or rule
 *                        id, a missing bundle or checkpoint file, crashpack not installed
 *
 * `crashpack run` and `crashpack watch` are the exception: they exit with their job's status (128 + N
 * for a signal; 127 when CMD cannot be executed). */
#ifndef CRASHPACK_EXITCODES_H
#define CRASHPACK_EXITCODES_H

enum {
    CP_EXIT_OK = 0,
    CP_EXIT_PROBLEM = 1,
    CP_EXIT_USAGE = 2,
    CP_EXIT_NOTFOUND = 3,
};

#endif
