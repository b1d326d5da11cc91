/* cmdopt.h - option parsing shared by the crashpack commands (command layer only). */
#ifndef CRASHPACK_CMDOPT_H
#define CRASHPACK_CMDOPT_H

/* The value of option `name` given as "--name=V" or "--name V" (advancing *i). NULL when a is not
 * that option; *bad is set when the value is missing. */
const char *cp_opt_value(const char *a, const char *name, int argc, char **argv, int *i, int *bad);

#endif
