/* cmd_report.c - `crashpack report BUNDLE`: placeholder, filled in below. */
#include "commands.h"
#include <stdio.h>
int cmd_report(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "crashpack report: not yet\n");
    return 2;
}
