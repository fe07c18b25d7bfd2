"""The rnnloop exception hierarchy: every user-facing failure is an RnnloopError."""

from __future__ import annotations


class RnnloopError(Exception):
    """Base class of every error rnnloop raises on purpose."""


class UnsupportedModelError(RnnloopError):
    """The model uses ops or attribute values rnnloop does not support (all listed at once)."""


class ModelError(RnnloopError):
    """The model is malformed: bad structure, ports, types or shapes."""


class BuildError(ModelError):
    """A Network or a traced function is built wrongly: an op's inputs do not fit it, a loop is
    incomplete, or a carry changes its structure, shape or dtype."""


class InputError(RnnloopError):
    """A feed does not match the model's inputs (name, dtype, rank or a fixed dimension)."""


class OpError(RnnloopError):
    """An op failed at run time; raised by op implementations without the origin,
    which the interpreter adds when it re-raises as RunError."""


class RunError(RnnloopError):
    """Running the model failed; the message starts with the node that failed."""


class FallbackWarning(UserWarning):
    """A loop runs in the interpreter instead of a fused kernel."""
