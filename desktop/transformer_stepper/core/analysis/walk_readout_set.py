"""Every walk readout, registered: the readout modules imported together (each registers its
own into walk_context.READOUTS, so none imports another)."""
from __future__ import annotations

from . import walk_readouts, walk_readouts_sum, walk_readouts_translator  # noqa: F401  (they register)
from .walk_context import READOUTS, Context, readout  # noqa: F401
