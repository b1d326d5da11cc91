/* hang.h - why are the threads not making progress: each thread's blocking state, and
 * deadlocks between pthread mutexes (issue 6, hang analysis).
 *
 * Inputs: the report's threads[] (frames from the native analysis), the bundle's snap.json (a
 * live capture: each thread's syscall and arguments, kernel state, kernel stack, and the futex
 * words read at the stop, with the owner tid glibc keeps in a pthread_mutex_t) and
 * proc/fds.json (what an fd is). Outputs, added to the report:
 *
 *   threads[].hang_state  {state, detail, source, syscall, fd, fd_target, mutex, mutex_symbol,
 *                          mutex_owner, kernel_function}, or null without any evidence
 *     state: running | mutex_wait | condvar_wait | futex_wait | io_wait | sleep | child_wait |
 *            signal_wait | join_wait | uninterruptible | cuda_sync | collective_wait | gil_wait |
 *            python_queue_wait | python_lock_wait | gpu_driver_wait | unknown
 *   hang   {snap (bool), trigger, reason, threads_stopped, threads_not_stopped,
 *           states {state: count}, deadlocks[] {summary, threads[] {tid, name,
 *           waits_for_mutex, waits_for_mutex_symbol, owner_tid, blocked_in, holds[] {mutex,
 *           symbol}, stack[]}}}
 *   crash_kind "hang" for a live capture (snap/watch bundles) */
#ifndef CRASHPACK_HANG_H
#define CRASHPACK_HANG_H
#include "bundle.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* Adds the fields above to report r (which has threads[] from the native analysis). */
void hang_analyze(struct bundle *b, cJSON *r);

/* The same on already-parsed inputs (snap and fds may be NULL): for tests and tools. */
void hang_analyze_json(cJSON *r, const cJSON *snap, const cJSON *fds);

/* Text section for `crashpack analyze`: per-thread states and deadlocks. */
#endif
