/* utf8.h - untrusted bytes as valid UTF-8: one validator for the analyzer's output paths. */
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

/* How a text formatter cleans and prints strings that came from a bundle or a knowledge base. */
struct report_text_ops {
    char *(*clean)(const char *s);          /* malloc()ed valid-UTF-8 copy */
    void (*put)(FILE *out, const char *s);  /* terminal-safe printing */
};

#endif
