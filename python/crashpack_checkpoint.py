"""crashpack_checkpoint - the old name of crashpack.checkpoint, kept working.

`import crashpack_checkpoint` gives the very module `crashpack.checkpoint` (one state, one set of
wrapped functions, whichever name a script uses). Pure Python, standard library only.
"""
import sys

from crashpack import checkpoint as _checkpoint

sys.modules[__name__] = _checkpoint
