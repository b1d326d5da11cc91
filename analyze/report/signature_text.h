/* signature_text.h - the signature lines of `crashpack analyze`'s text output (signature.h makes
 * the fields). put prints an untrusted string safely. Prints signature_info.explain[] when the
 * report has it (--explain). */
#ifndef CRASHPACK_SIGNATURE_TEXT_H
#define CRASHPACK_SIGNATURE_TEXT_H

#include <cjson/cJSON.h>
#include <stdio.h>

void signature_print(FILE *out, const cJSON *r, void (*put)(FILE *out, const char *s));

#endif
