"""Where a built-in model's compiled call spends its time, section by section of the generated code.

    python benchmarks/profile_kernel.py gru_decoder_step
    python benchmarks/profile_kernel.py lstm_native:12x512x256x100 --calls 50 --top 15

Every comment line of a generated kernel (`# MatMul 'MatMul_4' ...`, `# fused: ...`), the start of
every function and every `return` start a section: the tool loads the model with its kernels'
sources instrumented (at each of those places, a read of the CPU's cycle counter charges the cycles
since the previous mark to the section that mark began), runs it, and prints each section's share
of the cycles and its time per call at the counter's rate, largest first. A call made from a section
(a loop's function, a packed product) is charged to it up to the callee's first mark; the kernel's
`return` section runs to the next call's first mark, so it holds Python's part of a call. The marks
cost a few nanoseconds each, so sections inside a loop body of many steps are overstated: compare
shares between versions, not nanoseconds with onnxruntime. One thread; an ad-hoc instrument, not a
benchmark: the instrumented kernels are compiled apart from the real ones and never cached (their
source names this process's counters), though their source files are written to the kernel cache.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

import rnnloop
from rnnloop.codegen import fused
from rnnloop.models import MODELS, resolve

_SLOTS = 4096
_BUFFER = np.zeros(_SLOTS + 2, np.int64)  # [last count, open section, cycles of each section...]
_ADDRESS = _BUFFER.ctypes.data
_labels: list[str] = ["(before the first mark)"]
_MODULE = "rnnloop_profile_kernel"  # the name instrumented kernels import _mark by
sys.modules.setdefault(_MODULE, sys.modules[__name__])


def _read_counter(builder):
    i64 = ir.IntType(64)
    return builder.call(builder.module.declare_intrinsic("llvm.readcyclecounter", fnty=ir.FunctionType(i64, [])), [])


@intrinsic
def _counter(typingctx):
    """The CPU's cycle counter (x86: rdtsc)."""
    def codegen(context, builder, sig, args):
        return _read_counter(builder)
    return types.int64(), codegen


@njit
def _cycles():
    return _counter()


@intrinsic
def _mark(typingctx, address, section):
    """Charge the cycles since the last mark to the section it opened, and open `section`."""
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        counter = _read_counter(builder)
        base = builder.inttoptr(args[0], i64.as_pointer())
        last, opened = builder.load(base), builder.load(builder.gep(base, [ir.Constant(i64, 1)]))
        slot = builder.gep(base, [builder.add(opened, ir.Constant(i64, 2))])
        builder.store(builder.add(builder.load(slot), builder.sub(counter, last)), slot)
        builder.store(counter, base)
        builder.store(args[1], builder.gep(base, [ir.Constant(i64, 1)]))
        return context.get_dummy_value()
    return types.void(types.int64, types.int64), codegen


def _instrument(source: str) -> str:
    """`source` with a mark before each comment line and each return inside a function."""
    lines = [f"from {_MODULE} import _mark as _pmark"]
    function, previous = "?", ""
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if line.startswith("def "):
            function = line[4:line.index("(")]
        elif indent == "    " and stripped.startswith('"""') and previous.startswith("def "):  # after a docstring
            lines.append(line)
            _labels.append(f"{function} {number}: entry")
            lines.append(f"{indent}_pmark({_ADDRESS}, {len(_labels) - 1})")
            previous = line
            continue
        previous = line
        if indent and (stripped.startswith("# ") or stripped.startswith("return")):
            label = f"{function} {number}: {stripped[2:] if stripped.startswith('# ') else 'return, and what follows it'}"
            _labels.append(re.sub(r"\s+", " ", label)[:110])
            lines.append(f"{indent}_pmark({_ADDRESS}, {len(_labels) - 1})")
        lines.append(line.replace("cache=True", "cache=False"))  # (the marks' address is this process's)
    return "\n".join(lines) + "\n"


def _quantised(model):
    """`model` after onnxruntime's dynamic int8 quantisation (7-bit weights, as bench_quant.py)."""
    import os
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    with tempfile.TemporaryDirectory() as tmp:
        source, target = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, source)
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, reduce_range=True)
        return onnx.load(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a built-in model, NAME[:SIZES]")
    parser.add_argument("--calls", type=int, default=200, help="calls profiled (default 200)")
    parser.add_argument("--top", type=int, default=25, help="sections printed (default 25)")
    parser.add_argument("--source", action="store_true", help="also print the kernels' source, numbered")
    parser.add_argument("--int8", action="store_true",
                        help="the model as onnxruntime's quantize_dynamic makes it (as benchmarks/bench_quant.py)")
    args = parser.parse_args(argv)
    name, sizes = resolve(args.model)
    model, feeds = MODELS[name](**sizes)
    if args.int8:
        model = _quantised(model)
    load_source = fused.load_source
    fused.load_source = lambda source, label: load_source(_instrument(source), label=label)
    try:
        session = rnnloop.load(model, threads=1)
    finally:
        fused.load_source = load_source
    if args.source:
        for label, text in session.kernel_sources():
            print(f"# ===== {label}")
            print("\n".join(f"{k:4d}  {line}" for k, line in enumerate(text.splitlines(), 1)))
    session.run(None, feeds)
    _BUFFER[:] = 0
    _BUFFER[0] = start = _cycles()
    wall = time.perf_counter()
    for _ in range(args.calls):
        session.run(None, feeds)
    rate = (_cycles() - start) / (time.perf_counter() - wall)  # counts per second
    cycles = _BUFFER[2:2 + len(_labels)].astype(np.float64)
    total = cycles.sum()
    print(f"{args.model}: {total / rate / args.calls * 1e6:.1f} µs a call in marked sections "
          f"({args.calls} calls, counter at {rate / 1e9:.2f} GHz)")
    for i in np.argsort(cycles)[::-1][:args.top]:
        if cycles[i]:
            print(f"{cycles[i] / total:6.1%} {cycles[i] / rate / args.calls * 1e6:9.2f} µs  {_labels[i]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
