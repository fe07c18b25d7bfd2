"""The differential model fuzzer's campaign runner, and the judging that test_fuzz_models.py shares.

    python tests/fuzz_campaign.py --seeds 0:2000 [--jobs 1] [--save DIR] [--ort] [--timeout 300]

Each seed's model (model_fuzz.build_model) runs in a child process (fuzz_models_worker.py) on
both backends. Prints the count of each outcome, the fallback reasons grouped (node and value
names stripped, so one cause is one line), and every failing seed with its description; --save
writes each failing model as DIR/seed-<seed>.onnx with its feeds as DIR/seed-<seed>.npz.
--ort also asks onnxruntime (in a child of its own) and counts where it differs from the
interpreter; that is information, not a failure (onnxruntime has bugs of its own).

Outcomes: "agree", "fallback-agree" (some loop interpreted, answers agree) pass; "mismatch",
"fused-error" (numba raises, interp does not), "interp-error" (interp raises an RnnloopError on a
model the generator made valid; numba does not raise the same), "both-error" (both raise the
same class), "escaped" (a non-RnnloopError exception), "crash" (the child died) and "hang" (no
answer within the timeout) fail.
"""

from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import os
import pickle
import re
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from model_fuzz import build_model  # noqa: E402

PASSING = ("agree", "fallback-agree")
TOLERANCES = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-10, 1e-10)}
WORKER = Path(__file__).with_name("fuzz_models_worker.py")


class Worker:
    """fuzz_models_worker.py in a child process, started again after it dies or hangs."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None

    def ask(self, model: bytes, feeds: dict, engine: str = "rnnloop") -> tuple[str, object]:
        """("reply", dict), ("crash", exit status) or ("hang", seconds)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        data = pickle.dumps((model, feeds, engine))
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash", self._reap()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.stop()
            return "hang", self.timeout
        header = self.proc.stdout.read(8)
        if len(header) < 8:
            return "crash", self._reap()
        return "reply", pickle.loads(self.proc.stdout.read(struct.unpack("<Q", header)[0]))

    def _reap(self) -> int:
        code = self.proc.wait()
        self.proc = None
        return code

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# ---------------------------------------------------------------------------------------------
# judging


def compare(got: list, want: list) -> str | None:
    """None when two normalised output lists agree (type, dtype, shape, values to dtype tolerance,
    NaN equal to NaN), else what differs."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, ((gkind, g), (wkind, w)) in enumerate(zip(got, want)):
        if gkind != wkind:
            return f"output {k} is a {gkind}, expected a {wkind}"
        if wkind == "other":
            return f"output {k} is a {g}, expected {w}"
        pairs = [(g, w)] if wkind == "tensor" else None
        if wkind == "sequence":
            if len(g) != len(w):
                return f"output {k} is a sequence of {len(g)}, expected {len(w)}"
            pairs = list(zip(g, w))
        for j, (a, e) in enumerate(pairs):
            where = f"output {k}" + (f"[{j}]" if wkind == "sequence" else "")
            problem = compare_arrays(a, e)
            if problem:
                return f"{where}: {problem}"
    return None


def compare_arrays(a: np.ndarray, e: np.ndarray) -> str | None:
    if a.dtype != e.dtype:
        return f"dtype {a.dtype}, expected {e.dtype}"
    if a.shape != e.shape:
        return f"shape {a.shape}, expected {e.shape}"
    rtol, atol = TOLERANCES.get(e.dtype, (0, 0))
    # atol scales with the largest finite value: a difference of a few ulps of the values summed
    # (BLAS sums in another order) is within tolerance even where the sum cancels to near zero
    scale = float(np.max(np.abs(e[np.isfinite(e)]), initial=1.0)) if e.dtype.kind == "f" else 1.0
    try:
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * scale, equal_nan=True)
    except AssertionError as err:
        return " ".join(str(err).split())[:400]
    return None


def judge(answer: tuple[str, object]) -> tuple[str, str, list[str]]:
    """(outcome, detail, fallback reasons) of the worker's answer on one model."""
    what, reply = answer
    if what == "crash":
        return "crash", f"the child process died (exit status {reply}; a negative one is a signal)", []
    if what == "hang":
        return "hang", f"no answer within {reply} s", []
    interp, fused, fallbacks = reply["interp"], reply["numba"], reply["fallbacks"]
    for name, result in (("interp", interp), ("numba", fused)):
        if result[0] == "escaped":
            return "escaped", f"{name} let {result[1]} escape at {result[3]}: {result[2]}", fallbacks
    if interp[0] == "error":
        if fused[0] == "error" and fused[1] == interp[1]:
            return "both-error", f"{interp[1]} at {interp[3]}: {interp[2]}", fallbacks
        return "interp-error", f"interp {interp[1]} at {interp[3]}: {interp[2]}; numba {fused[0]}", fallbacks
    if fused[0] == "error":
        return "fused-error", f"numba {fused[1]} at {fused[3]}: {fused[2]}", fallbacks
    problem = compare(fused[1], interp[1])
    if problem:
        return "mismatch", problem, fallbacks
    return ("fallback-agree" if fallbacks else "agree"), "", fallbacks


def judge_onnxruntime(answer: tuple[str, object], interp: tuple) -> tuple[str, str]:
    """onnxruntime's outcome against the interpreter: ort-agree, ort-differs, ort-error, ort-crash..."""
    what, reply = answer
    if what != "reply":
        return f"ort-{what}", str(reply)
    result = reply["onnxruntime"]
    if result[0] != "ok":
        return "ort-error", f"{result[1]}: {result[2][:300]}"
    if interp[0] != "ok":
        return "ort-ran-interp-did-not", ""
    problem = compare(result[1], interp[1])
    return ("ort-differs", problem) if problem else ("ort-agree", "")


def normalise_reason(reason: str) -> str:
    """A fallback reason without the names that differ between models, so one cause groups as one."""
    reason = re.sub(r"^(plan|warning): ", "", reason)
    if len(reason) > 1 and reason[0] in "'\"" and reason[-1] == reason[0]:  # a reason that is a repr
        try:
            reason = ast.literal_eval(reason)
        except (ValueError, SyntaxError):
            pass
    wrapped = re.match(r"^\w+ '[^']*' \([^)]*\): interpreted \((.*)\)$", reason)  # plan.describe()
    reason = wrapped.group(1) if wrapped else reason
    reason = re.sub(r"'[^']*'", "'…'", reason)
    reason = re.sub(r'"[^"]*"', '"…"', reason)
    reason = re.sub(r"\b(?:[A-Za-z]+_)+\d+\b", "…", reason)  # value names like carried_in_7
    reason = re.sub(r"\d+", "N", reason)
    reason = re.sub(r"\(\s*[^()]*\bshape\b[^()]*\)", "(…)", reason)
    return " ".join(reason.split())[:300]


def run_seed(worker: Worker, seed: int, ort_worker: Worker | None = None) -> dict:
    """Build the seed's model, run it in the worker, judge the answer."""
    model, feeds, description = build_model(seed)
    data = model.SerializeToString()
    start = time.perf_counter()
    answer = worker.ask(data, feeds)
    outcome, detail, fallbacks = judge(answer)
    record = {"seed": seed, "outcome": outcome, "detail": detail, "fallbacks": fallbacks,
              "description": description, "seconds": time.perf_counter() - start, "model": data, "feeds": feeds}
    if ort_worker is not None:
        interp = answer[1]["interp"] if answer[0] == "reply" else ("none",)
        record["ort"] = judge_onnxruntime(ort_worker.ask(data, feeds, "onnxruntime"), interp)
    return record


# ---------------------------------------------------------------------------------------------
# the campaign


def parse_seeds(text: str) -> list[int]:
    """'0:2000' (a range) or '3,17,42' (a list)."""
    if ":" in text:
        lo, hi = text.split(":")
        return list(range(int(lo), int(hi)))
    return [int(s) for s in text.split(",")]


def campaign(seeds: list[int], jobs: int, timeout: float, ort: bool, save: Path | None, quiet: bool) -> int:
    outcomes: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    reason_seeds: dict[str, int] = {}
    ort_outcomes: collections.Counter = collections.Counter()
    failures, ort_differs = [], []
    local = threading.local()
    workers: list[Worker] = []
    lock = threading.Lock()

    def one(seed: int) -> dict:
        if not hasattr(local, "worker"):
            local.worker = Worker(timeout)
            local.ort = Worker(timeout) if ort else None
            with lock:
                workers.extend(w for w in (local.worker, local.ort) if w)
        return run_seed(local.worker, seed, local.ort)

    start = time.perf_counter()
    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            for n, r in enumerate(pool.map(one, seeds), 1):
                outcomes[r["outcome"]] += 1
                for reason in dict.fromkeys(normalise_reason(x) for x in r["fallbacks"]):
                    reasons[reason] += 1
                    reason_seeds.setdefault(reason, r["seed"])
                if r["outcome"] not in PASSING:
                    failures.append(r)
                    if save:
                        save.mkdir(parents=True, exist_ok=True)
                        (save / f"seed-{r['seed']}.onnx").write_bytes(r["model"])
                        np.savez(save / f"seed-{r['seed']}.npz", **r["feeds"])
                if "ort" in r:
                    ort_outcomes[r["ort"][0]] += 1
                    if r["ort"][0] == "ort-differs":
                        ort_differs.append(r)
                if not quiet:
                    print(f"[{n}/{len(seeds)} {time.perf_counter() - start:6.0f} s] seed {r['seed']}: "
                          f"{r['outcome']} ({r['seconds']:.1f} s){' ' + r['detail'][:160] if r['detail'] else ''}",
                          flush=True)
    finally:
        for w in workers:
            w.stop()
    print(f"\n{len(seeds)} seeds in {time.perf_counter() - start:.0f} s")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    if ort_outcomes:
        print("onnxruntime: " + ", ".join(f"{k} {v}" for k, v in ort_outcomes.most_common()))
    if reasons:
        print("\nfallback reasons (examples per reason, first seed):")
        for reason, count in reasons.most_common():
            print(f"  {count:5d}  seed {reason_seeds[reason]:6d}  {reason}")
    for r in failures:
        print(f"\n--- seed {r['seed']}: {r['outcome']}: {r['detail']}\n{r['description']}")
    for r in ort_differs:
        print(f"\n--- seed {r['seed']}: onnxruntime differs from the interpreter: {r['ort'][1]}\n{r['description']}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:200", help="a range lo:hi or a list a,b,c (default 0:200)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per model before it is a hang")
    parser.add_argument("--save", type=Path, help="write failing models and their feeds to this directory")
    parser.add_argument("--ort", action="store_true", help="also compare onnxruntime with the interpreter")
    parser.add_argument("--quiet", action="store_true", help="no line per seed")
    args = parser.parse_args(argv)
    return campaign(parse_seeds(args.seeds), args.jobs, args.timeout, args.ort, args.save, args.quiet)


if __name__ == "__main__":
    sys.exit(main())
