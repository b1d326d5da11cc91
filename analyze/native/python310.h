/* python310.h - CPython 3.10's threads and frames (python.h's walk, for 3.10).
 *
 * python_walk() hands a 3.10 interpreter to py310_walk(), which fills the same struct py_state
 * (python.h), so the JSON is the same contract. 3.10 differs from 3.11:
 *   _PyRuntime.interpreters.head -> PyInterpreterState.next ...
 *     -> tstate_head -> PyThreadState.next ...
 *       -> frame (a heap PyFrameObject) -> f_back ...
 * Each frame's code object gives co_name and co_filename (3.10 code objects have no qualname:
 * qualname stays NULL) and its line is PyCode_Addr2Line(code, f_lasti * 2) over the PEP 626 line
 * table (py310_addr2line), as 3.10's faulthandler and tracebacks compute it. Every Python frame
 * is its own _PyEval_EvalFrameDefault call (3.10 does not inline Python-to-Python calls), so every
 * frame is an entry frame and frame k merges with the k-th eval frame of the native stack.
 * PyThreadState has no native_thread_id in 3.10: the kernel tid is read from glibc's struct
 * pthread at thread_id (pthread_self()). The GIL (_PyRuntime.ceval.gil) and the thread names
 * (threading._active, 3.10's dict layout) as for 3.11. Every pointer is checked as in python.c
 * (caps PY_MAX_*, type names "frame"/"code", bounded strings); errors are strings on the thread
 * or the state. Never prints or exits.
 */
#ifndef CRASHPACK_PYTHON310_H
#define CRASHPACK_PYTHON310_H

#include "python.h"

#include <stddef.h>

struct walk;
struct py_layout;

/* The struct py_layout python.c's readers use for 3.10 objects (set as the walk's layout). */
const struct py_layout *py310_layout(void);
/* Walks a 3.10 runtime (st->runtime; st as python_walk has it). Returns 0, or -1 when out of
 * memory. */
int py310_walk(struct walk *w, struct py_state *st);

/* CPython 3.10's PyCode_Addr2Line over a copy of co_linetable: the line of the instruction at byte
 * offset addrq (addrq < 0: firstlineno); -1 when the table has no line for it. */
int py310_addr2line(const unsigned char *table, size_t len, int firstlineno, long addrq);

#endif
