/* tailcall.h - frames that tail calls removed, put back from DWARF call-site information.
 *
 * A function that ends in a tail call (`jmp callee`) leaves no frame: the callee returns straight
 * into its caller's caller. The compiler records such calls (DW_TAG_call_site with
 * DW_AT_call_tail_call, DWARF 5, or the GNU extension), so, like gdb, we can tell that the caller's
 * call at its return address went to function T while the frame above runs function C != T, and
 * find the unique chain of tail calls T -> ... -> C. Each function of the chain becomes a frame
 * whose pc is its tail call's return address (glibc's abort path: raise -> pthread_kill tail-calls
 * __pthread_kill_implementation).
 *
 * tailcall_chain() returns the synthesized pcs, innermost first. Never prints or exits.
 */
#ifndef CRASHPACK_TAILCALL_H
#define CRASHPACK_TAILCALL_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

#define TAILCALL_MAX_CHAIN 4u

/* Per-session state: symbol-name indexes of the modules whose call sites name a declaration
 * (resolved by name), built on first use. Owned by the caller. */
struct tailcall_cache;
struct tailcall_cache *tailcall_cache_new(void);
void tailcall_cache_free(struct tailcall_cache *c);

/* callee_pc/callee_activation: the inner frame; caller_pc: the next outer frame's pc (a return
 * address). Writes up to max pcs into out and returns their count (0: no tail calls between the
 * two, or not decidable). */
size_t tailcall_chain(struct tailcall_cache *c, Dwfl *dwfl, uint64_t callee_pc,
                      int callee_activation, uint64_t caller_pc, uint64_t *out, size_t max);

#endif
