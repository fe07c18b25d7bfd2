"""The table of front-end converters, keyed by (format, op type, since-version)."""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

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


class Unsupported(NamedTuple):
    """One node no converter handles: its op type, name, version and the reason."""

    op_type: str
    name: str
    version: str  # "ai.onnx opset 11", "opset1"
    reason: str
    where: str = ""  # where in the file, when the name may not say it: "layer 5"


def unsupported_listing(problems: Iterable[Unsupported], shown: int = 3) -> tuple[int, str]:
    """The number of nodes in `problems` and one line per op type, version and reason, naming the
    first `shown` nodes: a model with a hundred Conv nodes reads as one line, not a hundred."""
    groups: dict[tuple[str, str, str], list[Unsupported]] = {}
    unique = dict.fromkeys(problems)  # (in the model's order: the first nodes are named)
    for p in unique:
        groups.setdefault((p.op_type, p.version, p.reason), []).append(p)
    lines = []
    for (op_type, version, reason), nodes in sorted(groups.items()):
        if len(nodes) == 1:
            p = nodes[0]
            lines.append(f"  - {op_type} '{p.name}' ({p.where + ', ' if p.where else ''}{version}): {reason}")
            continue
        listed = ", ".join(f"'{p.name}'" + (f" ({p.where})" if p.where else "") for p in nodes[:shown])
        more = f", … (+{len(nodes) - shown} more)" if len(nodes) > shown else ""
        lines.append(f"  - {op_type} ×{len(nodes)} ({version}): {reason}: {listed}{more}")
    return len(unique), "\n".join(lines)
