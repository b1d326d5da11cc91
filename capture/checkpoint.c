/* checkpoint.c - the last saved checkpoint (stub until issue 3 lands). */
#include "capture.h"
#include "util.h"

void ckpt_collect(struct cap *c)
{
    cap_step(c, "checkpoint.json", "skipped", now_mono(), "not implemented yet");
}

void ckpt_verdict(struct cap *c)
{
    (void)c;
}
