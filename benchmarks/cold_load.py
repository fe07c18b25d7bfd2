"""The first load and run of a built-in model on a machine that has compiled nothing: each run a new
process with an empty RNNLOOP_CACHE_DIR, so rnnloop's own helpers (and convolution entries) compile
too, which `rnnloop bench --compile` leaves out (they compile once per machine). With --vs, a second
environment runs in turn with the first, run by run, and each pair gives a ratio.

    python benchmarks/cold_load.py vad_conv --runs 3 --vs RNNLOOP_NUMBA_FIXES=0

prints each run's seconds (load + first run, inside the process), then the median and range of each
and of the ratios. Numba's optimisation level is the environment's (NUMBA_OPT; users' default -O3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_CHILD = """
import json, sys, time
start = time.perf_counter()
import rnnloop
from rnnloop import models
name, args = models.resolve(sys.argv[1])
model, feeds = models.MODELS[name](**args)
built = time.perf_counter()
rnnloop.load(model).run(None, feeds)
print(json.dumps({"load_run": time.perf_counter() - built}))
"""


def cold_run(model: str, extra_env: dict[str, str]) -> float:
    """Seconds of load + first run of `model` in a new process with an empty cache."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory(prefix="rnnloop-cold-") as cache:
        env = {**os.environ, **extra_env, "RNNLOOP_CACHE_DIR": cache,
               "PYTHONPATH": os.pathsep.join(p for p in [root, os.environ.get("PYTHONPATH")] if p)}
        done = subprocess.run([sys.executable, "-c", _CHILD, model], env=env, capture_output=True, text=True,
                              check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["load_run"]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a built-in model, as rnnloop bench takes it (vad_conv, lstm_loop:1x64x128x200)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vs", metavar="NAME=VALUE", action="append", default=[],
                        help="the second environment's variables (repeatable)")
    args = parser.parse_args()
    other = dict(item.split("=", 1) for item in args.vs)
    firsts, seconds = [], []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for k in range(args.runs):
        firsts.append(cold_run(args.model, {}))
        line = f"run {k + 1}: {firsts[-1]:.2f} s"
        if other:
            seconds.append(cold_run(args.model, other))
            line += f"   with {' '.join(args.vs)}: {seconds[-1]:.2f} s   ratio {firsts[-1] / seconds[-1]:.3f}"
        print(line, flush=True)
    print(f"{args.model}, {started}, {os.cpu_count()} cores, NUMBA_OPT={os.environ.get('NUMBA_OPT', '3 (default)')}: "
          f"load + first run, empty cache: median (min-max) of {args.runs} runs {spread(firsts)} s")
    if other:
        print(f"with {' '.join(args.vs)}: {spread(seconds)} s; ratio pair by pair "
              f"{spread([a / b for a, b in zip(firsts, seconds)])}")


if __name__ == "__main__":
    main()
