"""Command line: rnnloop run | inspect | demo."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Sequence

import numpy as np

from .errors import RnnloopError
from .ir import Loop, iter_ops
from .session import Session, load


def describe_loop(op: Loop) -> list[str]:
    """A loop's trip-count/condition mode and its ports, as lines of text."""
    limits = []
    if op.trip_count:
        limits.append(f"trip count '{op.trip_count}'")
    if op.sliced:
        limits.append("the length of its sliced inputs")
    if op.cond:
        limits.append(f"initial condition '{op.cond}'")
    if op.body_cond_out:
        limits.append(f"body condition '{op.body.outputs[0]}'")
    mode = "runs until " + ", ".join(limits) if limits else "runs forever (no trip count and no condition)"
    carried, sources, invariants = op.input_groups()
    finals = op.outputs[:op.n_carried]
    stacked = op.outputs[op.n_carried:]
    lines = [f"loop {op.where()}: {mode}"]
    lines += [f"  carried    {init} -> {final}" for init, final in zip(carried, finals)]
    lines += [f"  sliced     {src} along axis {s.axis}{' reversed' if s.reverse else ''}"
              + (f", [{s.start}:{'' if s.end is None else s.end}:{s.stride}] parts of {s.part}"
                 if (s.start, s.end, s.stride, s.part) != (0, None, 1, 1) else "")
              for src, s in zip(sources, op.sliced)]
    lines += [f"  invariant  {name}" for name in invariants]
    lines += [f"  stacked    {out} {'concatenated' if s.concat else 'stacked'} on axis {s.axis}"
              f"{' reversed' if s.reverse else ''}{f' padded to {s.length}' if s.length is not None else ''}"
              for out, s in zip(stacked, op.stacked)]
    return lines


def inspect_text(session: Session) -> str:
    """Inputs, outputs, and every loop with its ports and mode."""
    lines = ["inputs:"]
    lines += [f"  {i.name}: {i.type} {i.shape}" for i in session.get_inputs()]
    lines.append("outputs:")
    lines += [f"  {o.name}: {o.type} {o.shape}" for o in session.get_outputs()]
    loops = [op for op in iter_ops(session.graph) if isinstance(op, Loop)]
    lines.append(f"loops: {len(loops)}")
    for op in loops:
        lines += ["  " + line for line in describe_loop(op)]
    lines.append("plan:")
    lines += ["  " + line for line in session.explain().splitlines()]
    return "\n".join(lines)


def _cmd_run(args: argparse.Namespace) -> int:
    session = load(args.model, max_iterations=args.max_iterations)
    feeds = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"--input takes NAME=FILE.npy, got '{item}'")
        feeds[name] = np.load(path, allow_pickle=False)
    outputs = session.run(None, feeds)
    os.makedirs(args.output_dir, exist_ok=True)
    for info, value in zip(session.get_outputs(), outputs):
        path = os.path.join(args.output_dir, f"{info.name.replace('/', '_')}.npy")
        if isinstance(value, list):
            value = np.stack(value) if value else np.empty((0,), np.float32)
        np.save(path, value)
        print(f"{info.name}: {np.shape(value)} {getattr(value, 'dtype', '')} -> {path}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    print(inspect_text(load(args.model)))
    return 0


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .models import lstm_loop
    model, feeds = lstm_loop(batch=1, input_size=64, hidden=128, steps=args.steps)
    print(f"model: an LSTM written as an ONNX Loop, batch 1, input 64, hidden 128, {args.steps} steps")
    session = load(model)
    print(inspect_text(session))
    ours = session.run(None, feeds)
    per_step = median_time(lambda: session.run(None, feeds), args.repeat) / args.steps * 1e6
    print(f"\nrnnloop interpreter : {per_step:8.2f} us/step (median of {args.repeat})")
    print("rnnloop fused       :   not built yet (the fused compiler is the next milestone)")
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime         :   not installed (pip install onnxruntime to compare)")
        return 0
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    peer = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    theirs = peer.run(None, feeds)
    peer_step = median_time(lambda: peer.run(None, feeds), args.repeat) / args.steps * 1e6
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
    print(f"onnxruntime {ort.__version__:8s}: {peer_step:8.2f} us/step (median of {args.repeat}); "
          f"interpreter/onnxruntime = {per_step / peer_step:.1f}x; max |difference| = {diff:.2e}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rnnloop", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a model on .npy inputs and save its outputs")
    run.add_argument("model")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    run.add_argument("--output-dir", default=".")
    run.add_argument("--max-iterations", type=int, default=None)
    run.set_defaults(fn=_cmd_run)
    inspect = commands.add_parser("inspect", help="print a model's inputs, outputs and loops")
    inspect.add_argument("model")
    inspect.set_defaults(fn=_cmd_inspect)
    demo = commands.add_parser("demo", help="run a built-in LSTM loop model and compare with onnxruntime")
    demo.add_argument("--steps", type=int, default=200)
    demo.add_argument("--repeat", type=int, default=20)
    demo.set_defaults(fn=_cmd_demo)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except RnnloopError as e:
        print(f"rnnloop: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
