/* jobid.h - the job and rank a crashpack-report/1 object belongs to, from what the report says of
 * its process (its environment, crashpack run's job id). The knowledge base groups crashes by it
 * (db/) and the renderers show it (render/). */
#ifndef CRASHPACK_JOBID_H
#define CRASHPACK_JOBID_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The job of a report: "slurm:ID", "torchelastic:ID", "run:ID" (crashpack run's own id) or
 * "master:ADDR:PORT" ("" when none), and RANK / LOCAL_RANK (SLURM_PROCID / SLURM_LOCALID), -1
 * when unknown. */
void cp_report_job(const cJSON *report, char *job, size_t joblen, int *rank, int *local_rank);

#endif
