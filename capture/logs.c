/* logs.c - stdout/stderr tails and ML debug files (stub until issue 3 lands). */
#include "capture.h"
#include "util.h"

void logs_collect(struct cap *c)
{
    cap_step(c, "logs", "skipped", now_mono(), "not implemented yet");
}
