/* signature_text.h - the signature lines of `crashpack analyze`'s text output (signature.h makes
 * the fields). Untrusted strings go through cp_text_put (utf8.h). Prints signature_info.explain[] when the
 * report has it (--explain). */
#ifndef CRASHPACK_SIGNATURE_TEXT_H
#define CRASHPACK_SIGNATURE_TEXT_H

#include <cjson/cJSON.h>
#include <stdio.h>

void signature_print(FILE *out, const cJSON *r);

#endif
