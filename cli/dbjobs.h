/* dbjobs.h - `crashpack db jobs`'s view of one job (db_jobs.c). */
#ifndef CRASHPACK_DBJOBS_H
#define CRASHPACK_DBJOBS_H

#include "kb.h"

#include <cjson/cJSON.h>

/* Prints one job's crashes in death order with its first failure and what explains each other
 * one, or, when jobs is not NULL, appends them there as an element of crashpack-db-jobs/1's
 * jobs[]. Returns 1 when the job has crashes, else 0. */
int db_show_job(struct kb *db, const char *job, cJSON *jobs);

#endif
