"""The README's whole-model table: rnnloop against onnxruntime and OpenVINO, several runs of each model.

    python benchmarks/readme_table.py                              # every model of the table, 5 runs each
    python benchmarks/readme_table.py vad_stream bilstm_encoder:1 --runs 3 --compile

Each run times rnnloop's fused kernels, onnxruntime and OpenVINO (forced to f32) on the same feeds, one
thread each, interleaved (rnnloop.bench.measure, as `rnnloop bench MODEL --no-interp --repeat 21` and
asv's WholeModel do), so a ratio is measured within one run. The table gives, per model, the median
over the runs of rnnloop's and onnxruntime's time per call and of the two ratios, with the ratios'
range (min-max) over the runs. --compile adds cold compile and warm load (new processes; see
rnnloop.bench.Startup). Prints the machine and date the figures belong to.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys

from rnnloop.bench import (Engine, measure, onnxruntime_runner, openvino_runner, rnnloop_runner, single_threaded,
                           startup_times, versions)
from rnnloop.models import MODELS, resolve

MODELS_OF_THE_TABLE = ("elementwise_chain:1", "elementwise_chain:10", "elementwise_chain:100", "vad_stream",
                       "gru_decoder_step", "bilstm_encoder", "bilstm_encoder:1", "bigru_encoder", "bigru_encoder:1",
                       "vad_conv", "crnn", "fsmn_stream")


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS_OF_THE_TABLE), help="built-in models (NAME[:SIZES])")
    parser.add_argument("--runs", type=int, default=5, help="runs of each model (default 5)")
    parser.add_argument("--repeat", type=int, default=21, help="samples per engine in a run (default 21)")
    parser.add_argument("--compile", action="store_true", help="also cold compile and warm load, once per model")
    args = parser.parse_args(argv)
    print(f"{datetime.date.today()}, {_cpu()}, one thread per engine; "
          + ", ".join(f"{k} {v}" for k, v in versions().items()), flush=True)
    print("| model | rnnloop | onnxruntime | vs onnxruntime | vs OpenVINO |" + (" cold compile | warm load |" if args.compile else ""))
    print("|---|---|---|---|---|" + ("---|---|" if args.compile else ""))
    with single_threaded():
        for spec in args.models:
            name, arguments = resolve(spec)
            model, feeds = MODELS[name](**arguments)
            engines = [Engine("rnnloop", lambda: rnnloop_runner(model, feeds, "numba")[0]),
                       Engine("onnxruntime", lambda: onnxruntime_runner(model, feeds)),
                       Engine("openvino", lambda: openvino_runner(model, feeds))]
            ours, theirs, vs_ort, vs_ov = [], [], [], []
            for _ in range(args.runs):
                results = measure(engines, repeat=args.repeat, reference="onnxruntime")
                seconds = {r.label: r.seconds for r in results if r.seconds is not None}
                if "rnnloop" not in seconds or "onnxruntime" not in seconds:
                    print(f"| `{spec}` | failed: {[r.error for r in results if r.error]} |", flush=True)
                    break
                ours.append(seconds["rnnloop"])
                theirs.append(seconds["onnxruntime"])
                vs_ort.append(seconds["rnnloop"] / seconds["onnxruntime"])
                vs_ov.append(seconds["rnnloop"] / seconds["openvino"] if "openvino" in seconds else None)
            else:
                row = (f"| `{spec}` | {_time(statistics.median(ours))} | {_time(statistics.median(theirs))} | "
                       f"{_spread(vs_ort)} | {_spread(vs_ov)} |")
                if args.compile:
                    s = startup_times(model, feeds)
                    row += f" {s.cold:.1f} s | {s.warm:.2f} s |"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
