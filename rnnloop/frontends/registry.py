"""The table of front-end converters, keyed by (format, op type, since-version)."""

from __future__ import annotations

from typing import Callable

CONVERTERS: dict[tuple[str, str], dict[int, Callable]] = {}


def converts(op_type: str, since: int, fmt: str = "onnx") -> Callable[[Callable], Callable]:
    """Register a converter for the op versions from `since` up to the next registered version."""

    def register(fn: Callable) -> Callable:
        versions = CONVERTERS.setdefault((fmt, op_type), {})
        if since in versions:
            raise RuntimeError(f"{fmt} {op_type} since {since} is converted twice: "
                               f"{versions[since].__name__} and {fn.__name__}")
        versions[since] = fn
        return fn

    return register


def find_converter(fmt: str, op_type: str, since_version: int) -> Callable | None:
    """The converter whose range holds `since_version` (a node's op-schema since-version), or None."""
    versions = CONVERTERS.get((fmt, op_type), {})
    eligible = [v for v in versions if v <= since_version]
    return versions[max(eligible)] if eligible else None
