/* jobid.c - see jobid.h. */
#include "jobid.h"
#include "jpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const cJSON *env, const char *a, const char *b)
{
    const char *s = cp_jstr_ne_at(env, a);
    if (!s && b)
        s = cp_jstr_ne_at(env, b);
    if (!s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 1000000000 ? -1 : (int)v;
}

void cp_report_job(const cJSON *report, char *job, size_t joblen, int *rank, int *local_rank)
{
    const cJSON *env = cp_jpath(report, "process.env");
    const char *s;
    job[0] = 0;
    if ((s = cp_jstr_ne_at(env, "SLURM_JOB_ID")))
        snprintf(job, joblen, "slurm:%s", s);
    else if ((s = cp_jstr_ne_at(env, "TORCHELASTIC_RUN_ID")))
        snprintf(job, joblen, "torchelastic:%s", s);
    else if ((s = cp_jstr_ne_at(report, "process.death.job")) ||
             (s = cp_jstr_ne_at(env, "CRASHPACK_JOB_ID"))) {
        /* crashpack run's id (the death's, or the environment's): "slurm-ID[.STEP]" and
         * "torchelastic-ID" when it came from the scheduler, so that a bundle without the
         * environment (a reported exit, an OOM kill) joins the same job as one with it */
        if (!strncmp(s, "slurm-", 6))
            snprintf(job, joblen, "slurm:%.*s", (int)strcspn(s + 6, "."), s + 6);
        else if (!strncmp(s, "torchelastic-", 13))
            snprintf(job, joblen, "torchelastic:%s", s + 13);
        else
            snprintf(job, joblen, "run:%s", s);
    } else if ((s = cp_jstr_ne_at(env, "MASTER_ADDR")) && cp_jstr_ne_at(env, "MASTER_PORT"))
        snprintf(job, joblen, "master:%s:%s", s, cp_jstr_ne_at(env, "MASTER_PORT"));
    *rank = env_int(env, "RANK", "SLURM_PROCID");
    *local_rank = env_int(env, "LOCAL_RANK", "SLURM_LOCALID");
}
