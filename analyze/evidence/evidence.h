/* evidence.h - the GPU, kernel-log, log-tail, checkpoint and environment evidence of a bundle in the
 * crashpack-report/1 object (fields in docs/evidence.md):
 *   gpu.xid[]              Xid lines of kmsg.json (analyze/evidence/xid.h) with the catalogue's meaning, blame
 *                          and action, own_gpu / own_pid, time-ordered
 *   gpu.nvidia_smi(_error) nvidia-smi.xml (analyze/evidence/gpu_smi.h), or why there is none
 *   kernel_log.lines[]     every line kmsg.json kept
 *   log.errors[]           framework error lines of the logs/ tails (analyze/evidence/logerr.h)
 *   checkpoint             the capture's verdict (checkpoint-verdict.json), re-checked here when the
 *                          same file (device, inode, size, mtime) is readable
 *   process.env            proc/environ.json's values (already redacted by the capture)
 *
 * Library code: never prints, never exits. Everything in the bundle is hostile.
 */
#ifndef CRASHPACK_EVIDENCE_H
#define CRASHPACK_EVIDENCE_H
#include "bundle.h"
#include "utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* Fills the fields above in `report` (made by build_report; process.pid is read from it).
 * Returns 0; -1 only when a data file (Xid catalogue, log patterns) could not be loaded, with the
 * reason in err (the evidence that does not need it is still filled). */
int evidence_add(cJSON *report, struct bundle *b, char *err, size_t errlen);

#endif
