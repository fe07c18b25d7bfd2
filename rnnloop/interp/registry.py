"""The table of interpreter functions, one per op, registered by ONNX op name."""

from __future__ import annotations

from typing import Callable

RUNNERS: dict[str, Callable] = {}


def interprets(*op_types: str) -> Callable[[Callable], Callable]:
    """Register a function as the interpreter of the named ops (duplicates are a bug)."""

    def register(fn: Callable) -> Callable:
        for op_type in op_types:
            if op_type in RUNNERS:
                raise RuntimeError(f"{op_type} is interpreted twice: {RUNNERS[op_type].__name__} and {fn.__name__}")
            RUNNERS[op_type] = fn
        return fn

    return register
