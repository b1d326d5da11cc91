/* gpu.c - which GPUs this process used (stub until issue 3 lands). */
#include "capture.h"
#include "util.h"

void gpu_collect(struct cap *c)
{
    cap_step(c, "gpu.json", "skipped", now_mono(), "not implemented yet");
}
