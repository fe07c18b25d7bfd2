"""Command line: rnnloop run | inspect | codegen | bench | cache | demo."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import __version__
from .errors import RnnloopError
from .ir import Loop, iter_ops
from .session import Session, load


class CommandLineError(RnnloopError):
    """A command that cannot be carried out as given: a missing file, a malformed option."""


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
    target = _target(args)
    given = {}  # read, and the output folder made, before the model loads (and compiles: seconds)
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CommandLineError(f"--input takes NAME=FILE.npy, got '{item}'")
        given[name] = _read_npy(name, path)
    os.makedirs(args.output_dir, exist_ok=True)
    model, feeds = _built(target)
    session = load(model, max_iterations=args.max_iterations)
    outputs = session.run(None, {**(feeds or {}), **given})  # a built-in model's own feeds, and --input's
    for info, value in zip(session.get_outputs(), outputs):
        path = os.path.join(args.output_dir, f"{info.name.replace('/', '_')}.npy")
        if isinstance(value, list):
            value = np.stack(value) if value else np.empty((0,), np.float32)
        np.save(path, value)
        print(f"{info.name}: {np.shape(value)} {getattr(value, 'dtype', '')} -> {path}")
    return 0


def _read_npy(name: str, path: str) -> np.ndarray:
    """The array of an .npy file given as --input NAME=PATH, or an error on one line that says what is wrong."""
    try:
        value = np.load(path, allow_pickle=False)
    except OSError as e:
        raise CommandLineError(f"--input {name}: cannot read '{path}': {e.strerror or e}") from e
    except ValueError as e:  # not an .npy file: np.load took it for a pickle, which it may not load
        raise CommandLineError(f"--input {name}: '{path}' is not an .npy file of an array (save one with "
                               "numpy.save; pickled objects are not loaded)") from e
    if not isinstance(value, np.ndarray):  # an .npz archive
        value.close()
        raise CommandLineError(f"--input {name}: '{path}' is an .npz archive; give one array per input, saved "
                               "with numpy.save")
    return value


@dataclass
class Target:
    """The model a command works on: a file, or a built-in model with its builder's arguments."""

    title: str
    model: str | None             # the file's path; None for a built-in model (see _built)
    name: str | None = None       # the built-in model's name
    arguments: dict | None = None  # the built-in model's arguments


def _is_file(spec: str) -> bool:
    """Whether MODEL names a file: it exists, or it has a folder or an extension (built-in names have neither)."""
    return os.path.exists(spec) or "/" in spec or os.sep in spec or "." in spec


def _target(args: argparse.Namespace) -> Target:
    """MODEL as a file, or as a built-in model NAME[:SIZES] with the size options applied."""
    if _is_file(args.model):
        if not os.path.isfile(args.model):
            raise CommandLineError(f"'{args.model}' is a directory, not a model file" if os.path.isdir(args.model)
                                   else f"no such model file: '{args.model}'")
        return Target(f"model: {args.model}", args.model)
    from .models import resolve, size_names
    try:
        name, arguments = resolve(args.model, **{k: getattr(args, k, None) for k in SIZE_OPTIONS})
    except ValueError as e:
        raise CommandLineError(f"{e}; or give the path of an .onnx or OpenVINO .xml file") from None
    sizes = size_names(name)
    title = (f"model: {name}:{'x'.join(str(arguments[k]) for k in sizes)} ({' x '.join(sizes)})"
             + (f", seed {arguments['seed']}" if "seed" in arguments else ""))
    return Target(title, None, name, arguments)


def _built(target: Target) -> tuple[Any, dict | None]:
    """The target's model (loaded lazily for a built-in one) and its feeds (None for a file)."""
    if target.name is None:
        return target.model, None
    from .models import MODELS
    return MODELS[target.name](**target.arguments)


def _cmd_inspect(args: argparse.Namespace) -> int:
    print(inspect_text(load(_built(_target(args))[0])))
    return 0


def _cmd_codegen(args: argparse.Namespace) -> int:
    session = load(_built(_target(args))[0], backend="numba")
    sources = session.kernel_sources()
    if not sources:
        print("no loop is fused:")
        print("\n".join("  " + line for line in session.explain().splitlines()))
    for label, source in sources:
        print(f"# ===== {label} =====")
        print(source.rstrip("\n"))
        print()
    return 0


def _pairs(items: list[str], option: str, kind: type) -> dict:
    """NAME=VALUE options as a dict, with a usable message for a malformed one."""
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            pairs[name] = kind(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise CommandLineError(f"{option} takes NAME={kind.__name__.upper()}, got '{item}'")
    return pairs


def _print_report(report, as_json: bool) -> int:
    """Print the report; 1 if an engine's outputs disagree or rnnloop could not run the model, else 0."""
    from .bench import format_report, report_json
    print(report_json(report) if as_json else format_report(report))
    bad = report.disagreeing()
    if bad:
        print(f"rnnloop: error: the outputs of {', '.join(r.label for r in bad)} disagree with "
              f"{report.reference or 'the first engine'}'s", file=sys.stderr)
    # rnnloop's own engines (not the one reading OpenVINO's conversion, which may be what failed)
    failed = [r for r in report.results if r.label.startswith("rnnloop") and not r.label.endswith("ov-ir")
              and r.error]
    for r in failed:
        print(f"rnnloop: error: {r.label} could not run the model: {r.error.removeprefix('n/a: ')}",
              file=sys.stderr)
    return 1 if bad or failed else 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import bench, infer_steps, random_feeds
    from .frontends.onnx import read_model
    from .models import MODELS, native_peer
    target = _target(args)
    native = None
    if target.name is None and str(target.model).lower().endswith(".xml"):  # OpenVINO IR: vs OpenVINO
        import rnnloop
        feeds = random_feeds(rnnloop.load(target.model, backend="interp"), _pairs(args.dim, "--dim", int),
                             _pairs(args.input_value, "--input-value", float))
        model, steps = target.model, args.steps
    elif target.name is None:
        proto = read_model(target.model)  # a corrupt file is a ModelError, reported on one line
        feeds = random_feeds(proto, _pairs(args.dim, "--dim", int), _pairs(args.input_value, "--input-value", float))
        model, steps = target.model, args.steps or infer_steps(proto, feeds)
    else:
        model, feeds = _built(target)
        steps = target.arguments.get("steps")
        peer = native_peer(target.name)
        if peer:  # ONNX's own LSTM/GRU op on the same weights and feeds
            native = (peer.split("_")[0].upper(), *MODELS[peer](**target.arguments))
    report = bench(model, feeds, title=target.title, steps=steps, native=native, repeat=args.repeat,
                   warmup=args.warmup, interp=args.interp, openvino=not args.no_openvino, startup=args.compile,
                   threads=args.threads)
    return _print_report(report, args.json)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .bench import bench
    from .models import lstm_loop, lstm_native
    sizes = {"batch": 1, "input_size": 64, "hidden": 128, "steps": args.steps}
    model, feeds = lstm_loop(**sizes)
    title = (f"rnnloop demo: an LSTM cell written as an ONNX Loop (batch 1, input 64, hidden 128, {args.steps} "
             "steps),\nrun by rnnloop fused into one Numba kernel (numba) and interpreted (interp), and by "
             "onnxruntime on the same\nLoop model and on ONNX's own LSTM op with the same weights")
    print("rnnloop demo: loading; the first run on this machine compiles the fused kernel (seconds), "
          "later runs load it from the cache ...", file=sys.stderr, flush=True)
    report = bench(model, feeds, title=title, steps=args.steps, native=("LSTM", *lstm_native(**sizes)),
                   repeat=args.repeat, interp=True, openvino=False)
    status = _print_report(report, False)
    print("\nmore: rnnloop bench lstm_loop:16x128x256x200 (batch x input x hidden x steps); "
          "rnnloop bench --compile gru_scan;\n      rnnloop codegen lstm_loop; rnnloop inspect lstm_loop")
    return status


SIZE_OPTIONS = ("batch", "input_size", "hidden", "steps", "seed")


def _model_options(parser: argparse.ArgumentParser, *, seed: bool = True, file_steps: bool = False) -> None:
    """MODEL and the sizes of a built-in model; `seed` when its weights or feeds change what the command
    does, `file_steps` when --steps also means something for a model file (bench: the time per step)."""
    parser.add_argument("model", metavar="MODEL",
                        help="an .onnx file, an OpenVINO .xml file (its .bin beside it), or a built-in model "
                        "NAME[:SIZES], SIZES in the order of its builder's parameters, e.g. lstm_loop:16x128x256x200 "
                        "(batch x input x hidden x steps), small_loop:1000 (steps); names: "
                        + ", ".join(_built_in_names()))
    for flag, what in (("--batch", "batch size"), ("--input-size", "input size"), ("--hidden", "hidden size")):
        parser.add_argument(flag, type=int, default=None, metavar="N",
                            help=f"the {what} of a built-in model (overrides SIZES)")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="the steps of a built-in model (overrides SIZES)"
                        + ("; for a model file, the steps a run takes, to report the time per step (default: "
                           "the length of the loops' sequence inputs or the trip count fed)" if file_steps else ""))
    if seed:
        parser.add_argument("--seed", type=int, default=None,
                            help="the seed of a built-in model's random weights and feeds (default 0)")


def _cmd_cache(args: argparse.Namespace) -> int:
    from .codegen.cache import cache_info, clear_cache
    if args.action == "clear":
        older = None if args.older_than is None else args.older_than * 86400.0
        removed = clear_cache(older_than=older)
        print(f"removed {_count(removed['kernels'], 'kernel')} and {_count(removed['runtime'], 'runtime file')} "
              f"({removed['bytes'] / 1e6:.1f} MB) from {cache_info()['directory']}")
        return 0
    info = cache_info()
    mb = {k: f"{info[k] / 1e6:.1f} MB" for k in ("kernel_bytes", "runtime_bytes", "bytes")}
    print(f"directory: {info['directory']}\n"
          f"kernels:   {info['kernels']} ({info['compiled']} compiled functions, {mb['kernel_bytes']})\n"
          f"runtime:   {info['runtime']} files of rnnloop's own compiled helpers ({mb['runtime_bytes']})\n"
          f"total:     {mb['bytes']}")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _days(text: str) -> float:
    """A --older-than value: a number of days, zero or more."""
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days >= 0:  # (also NaN)
        raise argparse.ArgumentTypeError(f"takes a number of days, 0 or more, got '{text}'")
    return days


def _built_in_names() -> list[str]:
    from .models import MODELS
    return list(MODELS)


def _bench_parser(commands) -> None:
    bench = commands.add_parser(
        "bench", help="time rnnloop, onnxruntime and OpenVINO on a model, one thread each (or --threads N)",
        description="Time rnnloop (fused numba kernels; the interpreter too when a run is cheap, or with --interp), "
        "onnxruntime and OpenVINO (f32) on one model with the same feeds, one thread each unless --threads "
        "says otherwise; check that their outputs agree and print medians and ratios to onnxruntime (exit "
        "status 1 if the outputs disagree or rnnloop cannot run the model). A built-in LSTM/GRU model is "
        "also compared with ONNX's own LSTM/GRU op on the same weights. Feeds of an .onnx file are random: "
        "symbolic dims from --dim (else 1), integer scalar inputs (trip counts) 100, booleans true, other "
        "integer tensors 0, unless --input-value sets them.")
    _model_options(bench, file_steps=True)
    bench.add_argument("--repeat", type=int, default=10, metavar="N",
                       help="timed samples per engine, of which the median is reported (default 10)")
    bench.add_argument("--warmup", type=int, default=1, metavar="N",
                       help="untimed rounds per engine after the first run (default 1)")
    bench.add_argument("--json", action="store_true", help="print the report as JSON")
    bench.add_argument("--compile", action="store_true",
                       help="also time cold compile (new process, empty RNNLOOP_CACHE_DIR) and warm load "
                       "(new process, filled cache: from import rnnloop to the first result)")
    group = bench.add_mutually_exclusive_group()
    group.add_argument("--interp", action="store_true", default=None,
                       help="time rnnloop's interpreter however slow (default: when a run takes under 0.5 s)")
    group.add_argument("--no-interp", dest="interp", action="store_false", help="leave the interpreter out")
    bench.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out")
    bench.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE", help="a symbolic dimension's size")
    bench.add_argument("--input-value", action="append", default=[], metavar="NAME=VALUE",
                       help="fill an input with VALUE (a trip count, a condition)")
    bench.add_argument("--threads", type=_threads, default=1, metavar="N",
                       help="threads per engine, BLAS included: 1 (default) times every engine on one thread; N gives "
                       "each N; 0 gives each its own default (every core this process may use). Startup (--compile) is "
                       "timed on one thread")
    bench.set_defaults(fn=_cmd_bench, timing=True)


def _threads(text: str) -> int:
    value = int(text) if text.strip().isdigit() else -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a number of threads (0 or more), got {text!r}")
    return value


def _limited_process(argv: Sequence[str] | None, threads: int) -> None:
    """Run a timing command on `threads` threads: without threadpoolctl, the BLAS pools NumPy and SciPy loaded
    on `import rnnloop` can only be limited by environment variables set before, so the command line starts
    again in a new process with them (only when run as a program, never from a caller's process)."""
    from .bench import can_limit_threads, thread_env
    missing = {k: v for k, v in thread_env(threads).items() if k not in os.environ}
    if argv is None and missing and not can_limit_threads():
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "rnnloop", *sys.argv[1:]], {**os.environ, **missing})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rnnloop", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rnnloop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a model on .npy inputs and save its outputs as .npy files",
                              description="Run a model once and save each output as DIR/NAME.npy (--output-dir; a / in "
                              "NAME becomes _). A built-in model runs on its own random feeds unless --input "
                              "replaces them.")
    _model_options(run)
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="feed input NAME the array saved in FILE.npy (numpy.save); once per input")
    run.add_argument("--output-dir", default=".", metavar="DIR", help="where to write the outputs (default: here)")
    run.add_argument("--max-iterations", type=int, default=None, metavar="N",
                     help="stop with an error when a loop runs more than N iterations")
    run.set_defaults(fn=_cmd_run)
    inspect = commands.add_parser("inspect", help="print a model's inputs, outputs, loops and plan (compiled or "
                                  "interpreted, and why)")
    _model_options(inspect, seed=False)
    inspect.set_defaults(fn=_cmd_inspect)
    codegen = commands.add_parser("codegen", help="print the source of every kernel rnnloop compiles for a model")
    _model_options(codegen)
    codegen.set_defaults(fn=_cmd_codegen)
    _bench_parser(commands)
    cache = commands.add_parser("cache", help="show or clear the compiled-kernel cache (RNNLOOP_CACHE_DIR)")
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("info", help="the cache's directory, its kernels and its size")
    clear = actions.add_parser("clear", help="delete cached kernels and rnnloop's compiled helpers (they compile "
                               "again when next used)")
    clear.add_argument("--older-than", type=_days, default=None, metavar="DAYS",
                       help="delete only what no process used for more than DAYS days (a number: 0.5 is 12 hours)")
    cache.set_defaults(fn=_cmd_cache)
    demo = commands.add_parser("demo", help="the built-in LSTM loop: rnnloop compiled vs interpreted vs onnxruntime")
    demo.add_argument("--steps", type=int, default=200, metavar="N", help="the LSTM's steps (default 200)")
    demo.add_argument("--repeat", type=int, default=20, metavar="N",
                      help="timed samples per engine, of which the median is shown (default 20)")
    demo.set_defaults(fn=_cmd_demo, timing=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The rnnloop command; returns its exit status (a problem with the model or the files is reported on
    stderr, without a traceback, with status 1)."""
    args = _parser().parse_args(argv)
    try:
        if getattr(args, "timing", False):
            from .bench import limited_threads
            threads = getattr(args, "threads", 1)
            _limited_process(argv, threads)
            with limited_threads(threads):
                return args.fn(args)
        return args.fn(args)
    except RnnloopError as e:
        print(f"rnnloop: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a file we could not read or write (output dir, cache dir, a model's data)
        where = f": '{e.filename}'" if e.filename else ""
        print(f"rnnloop: error: {e.strerror or e}{where}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
