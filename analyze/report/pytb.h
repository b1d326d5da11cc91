/* pytb.h - a Python traceback as the interpreter printed it, read back (a `crashpack run` job's
 * output: output.txt, a log tail), in the shape of the hook's exception.json, so that pyexc.h
 * validates and caps it the same way.
 *
 * What it reads: "Traceback (most recent call last):", the "  File "F", line N, in FUNC" frames
 * (source lines, carets and "[Previous line repeated ...]" skipped), the "Type: message" line and
 * the message's further lines (up to a blank line, another traceback or a chain separator); the
 * chain backwards through "The above exception was the direct cause of the following exception:"
 * (cause) and "During handling of the above exception, another exception occurred:" (context); a
 * DataLoader worker's re-raised error ("Caught T in DataLoader worker process N.\nOriginal
 * Traceback ..."). A prefix every line of the traceback carries ("[rank0]: ") is taken off, and
 * lines without it (other ranks' output) are passed over. */
#ifndef CRASHPACK_PYTB_H
#define CRASHPACK_PYTB_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Lines that are not blank after a traceback's "Type: message" line (the message's further lines
 * included; a worker's original traceback not) that still let it be the death's: more, and it
 * was one the job printed and went on from (a logged error). */
#define PYTB_TRAILING_MAX 10

/* text (len bytes, no NUL needed): already without carriage returns and terminal escapes
 * (pytb_clean). The last traceback of text as {"fatal": true, "exception": EXC} (EXC: {type,
 * mro: [type], message, frames[{function, file, line}], cause, context, worker}), or NULL when
 * there is none (or it is followed by more than PYTB_TRAILING_MAX lines). *line: the 1-based
 * line of its "Traceback (most recent call last):". */
cJSON *pytb_parse(const char *text, size_t len, int *line);

/* A copy of len bytes of text as a terminal shows it, NUL-terminated: "\r\n" as "\n", a line's
 * text before a lone "\r" gone (a progress bar's redraws), terminal escapes (ESC [ ... and ESC X)
 * out, NUL bytes as '?'. NULL when out of memory; *outlen its length. */
char *pytb_clean(const char *text, size_t len, size_t *outlen);

#endif
