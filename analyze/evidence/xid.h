/* xid.h - NVIDIA Xid lines from the kernel log, and the Xid catalogue (rules/gpu/xid.json).
 *
 * The lines themselves are parsed by common/kline.h (kline_xid_parse), which the capture handler and
 * the node service share.
 */
#ifndef CRASHPACK_XID_H
#define CRASHPACK_XID_H
#include "kline.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* The catalogue rules/gpu/xid.json (found with cp_datapath); NULL with a reason in err. */
cJSON *xid_catalog_load(char *err, size_t errlen);
/* The catalogue entry of `code` ({mnemonic, meaning, blame, action, ...}) or NULL when unknown. */
const cJSON *xid_catalog_entry(const cJSON *cat, int code);

#endif
