/* utf8.h - untrusted bytes as valid UTF-8, and the one terminal policy for printing them.
 *
 * Every string that came from a bundle or from the knowledge base is untrusted. The JSON outputs
 * carry it cleaned (cp_utf8_clean: invalid bytes become U+FFFD; cJSON escapes controls); every
 * text output prints it with cp_text_put, so that no such string can drive the terminal. */
#ifndef CRASHPACK_UTF8_H
#define CRASHPACK_UTF8_H
#include <stddef.h>
#include <stdio.h>

/* Length (1..4) of the valid UTF-8 sequence at s, at most `left` bytes long, or 0 when it is not
 * one (overlong forms, surrogates and code points above U+10FFFF are invalid). A NUL byte ends a
 * sequence, so (size_t)-1 is a safe `left` for a terminated string. */
size_t cp_utf8_seq(const unsigned char *s, size_t left);

/* A malloc()ed copy of the terminated string s with each invalid byte replaced by U+FFFD; NULL
 * when out of memory. */
char *cp_utf8_clean(const char *s);

/* Replaces every string in the tree j (objects and arrays, recursively) by its cp_utf8_clean()
 * copy where that differs. */
struct cJSON;
void cp_utf8_clean_tree(struct cJSON *j);

/* The terminal policy, strict: prints s with every byte that could control a terminal made
 * visible - C0 controls as \xNN (newline and tab as \n and \t), DEL as \x7f, C1 controls
 * (U+0080..U+009F, which some terminals read as CSI, OSC...) as \u00NN, and invalid UTF-8 as
 * \xNN per byte; valid printable UTF-8 is printed as it is. NULL prints nothing. */
void cp_text_put(FILE *out, const char *s);

/* cp_text_put of at most max bytes of s (max 0: all of it); a UTF-8 sequence that would cross the
 * limit is not printed. For fixed-width columns. */
void cp_text_putn(FILE *out, const char *s, size_t max);

#endif
