/* python.h - CPython's threads and frames, read from a core, and merged into the native stacks.
 *
 * Versions: CPython 3.11, 3.12, 3.13 and 3.14, the default (GIL, release) build; anything else
 * (3.10 and older, free-threaded "t" builds, debug "d" builds, versions without a layout row) is
 * reported as unsupported with the reason in py_state.error.
 *
 * python_scan() finds the interpreter in the process: every module named python* or libpython*
 * with the `_PyRuntime` symbol (else its `.PyRuntime` section) is walked, and the one whose
 * interpreter has thread states is kept (ctypes can map a second libpython whose runtime never
 * started; two live ones are named in the error). The version comes from `Py_Version`, else from
 * 3.13+'s _Py_DebugOffsets, else from the module's name. It picks the layout for that version
 * (pylayout.h) and, on 3.13+, puts over it the offsets the core's own `_Py_DebugOffsets` table
 * gives (at the start of _PyRuntime: cookie "xdebugpy", version, free_threaded, then offsets with
 * their structures' sizes), each checked; layout_source / layout_check say which was used and
 * where the two differ. Then it walks
 *   _PyRuntime.interpreters.head -> PyInterpreterState.next ...
 *     -> threads.head -> PyThreadState.next ...
 *       -> the current frame (3.11/3.12 cframe->current_frame, 3.13+ current_frame)
 *         -> _PyInterpreterFrame.previous ...
 * skipping 3.12+'s shim frames (owner FRAME_OWNED_BY_CSTACK; 3.14 FRAME_OWNED_BY_INTERPRETER),
 * reading each frame's code object (f_code; 3.13 f_executable; 3.14 a _PyStackRef, tag bits
 * masked) for co_name, co_qualname, co_filename and the line from the compact line table
 * (co_linetable, one format from 3.11 to 3.14) at the frame's instruction (prev_instr; 3.13+
 * instr_ptr), exactly as CPython's own tracebacks and faulthandler compute it. It also reads the
 * GIL's state (3.11 _PyRuntime.ceval.gil; 3.12+ each interpreter's ceval.gil pointer: locked,
 * last_holder), and names each thread from the threading module's registry
 * (modules["threading"]._active[thread_id]._name), best effort. Every pointer comes from the core
 * and is checked: counts are capped, a code object must have type "code", strings are bounded,
 * and what cannot be read becomes an error string on the thread (or on the whole scan) rather
 * than a failure.
 *
 * python_thread_json() adds to one native thread's JSON object (native.c's thread line):
 *   python          {thread_id (hex pthread_t), name, interpreter, holds_gil, frames_truncated,
 *                    error}
 *                   or null (no Python thread state for this tid)
 *   python_frames[] {function (co_name), qualname, file, line, entry, native_frame_index,
 *                   and with want_locals: locals {name: repr}, locals_truncated when cut}
 *                   innermost first; [] for a thread that runs no Python
 *   python_merge    "ok" | "unmerged: WHY" | null (no Python frames)
 * The merge: from 3.11 one _PyEval_EvalFrameDefault call runs a chain of Python frames (calls
 * from Python to Python are inlined); the first frame of each call is its entry frame (3.11:
 * is_entry set; 3.12+: the frame whose previous is a shim). So the Python frames, innermost
 * first, are cut after each entry frame into groups. 3.12+: the shim is a local of its
 * _PyEval_EvalFrameDefault call, so group k is placed on the native frame whose stack range
 * [sp, next frame's sp) holds its shim's address (no symbol needed: Debian's 3.14 runs the loop
 * in an unnamed clone). Otherwise (3.11, or a placement that fails) group k runs under the k-th
 * _PyEval_EvalFrameDefault frame of the native stack (innermost first). native_frame_index is
 * that frame's position in the thread's frames[] array. When neither places every group (a
 * native unwind cut short, an eval function without a symbol), the frames are kept with
 * native_frame_index null and python_merge says why.
 *
 * Versions: 3.11 here (layout: pylayout.h); 3.10 in python310.h (heap PyFrameObjects, the PEP 626
 * line table, every frame an entry frame, the kernel tid from glibc's struct pthread), which fills
 * the same structures: python_walk() dispatches to it. Others are named and reported unsupported.
 *
 * Ownership: struct py_state and everything in it belongs to the caller (python_free). The
 * session must outlive nothing here: strings are copied. Never prints or exits.
 */
#ifndef CRASHPACK_PYTHON_H
#define CRASHPACK_PYTHON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

struct unwind_session;
struct unwind_stack;
struct py_lock;

#define PY_MAX_INTERPRETERS 64u
#define PY_MAX_THREADS 4096u        /* over all interpreters */
#define PY_MAX_FRAMES 4096u         /* per thread */
#define PY_MAX_TOTAL_FRAMES 65536u  /* over all threads: a hostile core cannot make the walk long */
#define PY_MAX_STRING 4096u
#define PY_MAX_LINETABLE (1u << 20)

struct py_local {
    char *name, *value; /* the name, and its short, masked repr (pylocals.h) */
};

struct py_frame {
    uint64_t addr;      /* the _PyInterpreterFrame */
    char *function;     /* co_name (what tracebacks print); NULL when unreadable */
    char *qualname;     /* co_qualname */
    char *file;         /* co_filename */
    int line;           /* -1 when unknown */
    int is_entry;
    uint64_t shim;      /* 3.12+: the shim frame after an entry frame (on its eval call's C stack) */
    struct py_local *locals; /* with py_state.want_locals: the frame's bound locals (pylocals.h) */
    unsigned nlocals;
    int locals_truncated; /* some were left out (a cap) */
};

struct py_thread {
    uint64_t tstate;
    uint64_t thread_id;      /* pthread_t (threading.get_ident(), faulthandler's "Thread 0x...") */
    int64_t native_tid;      /* the kernel's tid; 0 when unknown */
    int64_t interp_id;
    char *name;              /* threading.Thread's name (threading._active); NULL when unknown */
    int holds_gil;
    struct py_frame *frames; /* innermost first */
    size_t nframes;
    int truncated;           /* more than PY_MAX_FRAMES frames */
    char error[160];         /* why the walk stopped early; "" when it reached the outermost frame */
};

struct py_state {
    int present;          /* a CPython runtime was found in the process */
    char module[256];     /* the module holding it (its path as the core recorded it) */
    char version[32];     /* "3.11.2", or "3.11" when only the module name said it */
    uint64_t runtime;     /* _PyRuntime's address */
    const char *runtime_source; /* "symbol" | "section" */
    int supported;        /* a layout exists and the walk ran */
    const char *layout_source;  /* "debug_offsets" (3.13+: the core's own) | "table" | NULL */
    char layout_check[512];     /* "" when the core's debug offsets equal the generated row (or
                                 * the version has none); else what differs, or why they were
                                 * not used */
    unsigned runtimes;          /* CPython runtimes found (python_scan walks each) */
    int gil_locked;       /* -1 when unknown */
    uint64_t gil_holder;  /* the holding PyThreadState when locked */
    struct py_thread *threads;
    size_t nthreads;
    struct py_lock *locks; /* threading locks the threads reach (pylocks.h) */
    size_t nlocks;
    char error[256];      /* why nothing (or not everything) could be read; "" when fine */
    int want_locals;      /* set by the caller: read each frame's locals (python_locals = on;
                           * 3.11-3.14, not 3.10) and put them in python_frames[].locals */
};

/* Reads len bytes of the process's memory at addr; 0, or -1 when not there. */
typedef int (*python_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Fills st (always initialised; st->present says whether there was a Python at all). Returns 0, or
 * -1 when out of memory. */
int python_scan(struct unwind_session *s, struct py_state *st, int want_locals);
/* The walk itself, over any memory (python_scan's second half; `crashpack snap` runs it on the live
 * process to find the pages a slim core must keep for it): st->present, module, runtime and
 * runtime_source are set by the caller (st initialised as python_scan does: zeroed, gil_locked
 * -1); module is the interpreter module's path (its name gives the version when py_version, the
 * address of Py_Version, is 0). Returns 0, or -1 when out of memory. */
int python_walk(python_read_fn read, void *ctx, const char *module, uint64_t py_version,
                struct py_state *st);
void python_free(struct py_state *st);

/* The "python" object for the analysis (version, runtime, GIL, status) or NULL when no Python. */
cJSON *python_state_json(const struct py_state *st);

/* Adds python, python_frames and python_merge (see above) to thread object t, whose "frames"
 * array is already there; us, the thread's native stack those frames came from (its frames' sp),
 * may be NULL. */
void python_thread_json(const struct py_state *st, int64_t tid, cJSON *t,
                        const struct unwind_stack *us);
/* 1 when the native thread tid runs Python (python_thread_json then reads its frames array). */
int python_thread_known(const struct py_state *st, int64_t tid);

/* CPython 3.11-3.14's PyCode_Addr2Line over a copy of co_linetable: the line of the instruction at byte
 * offset addrq (addrq < 0: firstlineno). -1 when the table has no line for it. */
int python_addr2line(const unsigned char *table, size_t len, int firstlineno, long addrq);

#endif
