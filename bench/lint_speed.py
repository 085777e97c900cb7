"""Static linting speed: `fsdp2-lint check` (cold and warm cache) against Ruff with one rule and
Fixit, on the same files, side by side in one run.

    python bench/lint_speed.py                      # the installed torch package's sources
    python bench/lint_speed.py bench-corpus/        # plus repositories from bench/fetch_corpus.py

Ruff and Fixit are found on PATH (or --ruff/--fixit); keep them out of the project's environment:
    python -m venv bench-venv && bench-venv/bin/pip install ruff fixit
    PATH="$PWD/bench-venv/bin:$PATH" python bench/lint_speed.py

Prints wall time, files/s, lines/s and peak RSS per tool, the prefilter's skip ratio, and the
ratios README's performance targets set (Performance, "Latest figures"). Each tool gets the same explicit list of files.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGETS = (  # (label, ratio, target, higher is better)
    ("cold check / Ruff one rule", "cold_vs_ruff", 1.0, False),
    ("Fixit / cold check", "fixit_vs_cold", 20.0, True),
    ("cold / warm check", "cold_vs_warm", 10.0, True),
)
RSS_TARGET_MB = 300
PROFILED_FUNCTIONS = 45  # rows of a --profile table


@dataclass
class Run:
    tool: str
    seconds: float
    cpu_seconds: float  # user + system, of the command and the workers it waited for
    peak_rss_mb: float
    status: int


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="*", type=Path, help="directories of Python files (added to torch's)")
    parser.add_argument("--no-torch", action="store_true", help="leave out the installed torch package's sources")
    parser.add_argument("--sample", type=int, help="lint every k-th file so that about this many are linted")
    parser.add_argument("--jobs", type=int, help="fsdp2-lint --jobs (default: all cores)")
    parser.add_argument("--ruff", default=shutil.which("ruff"), help="ruff executable (default: from PATH)")
    parser.add_argument("--ruff-rule", default="F401", help="the one Ruff rule to run (default: F401)")
    parser.add_argument("--fixit", default=shutil.which("fixit"), help="fixit executable (default: from PATH)")
    parser.add_argument("--fixit-rule", default="fixit.rules:NoRedundantFString")
    parser.add_argument("--no-fixit", action="store_true", help="skip Fixit (it takes minutes on a large corpus)")
    parser.add_argument("--profile", type=Path, help="only write where a cold serial check's time goes to this file")
    args = parser.parse_args()

    files = corpus_files(args.corpus, with_torch=not args.no_torch, sample=args.sample)
    if not files:
        parser.error("no Python files found")
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    print(f"corpus: {len(files)} files, {lines} lines, from {', '.join(map(str, corpus_roots(args)))}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start (wall times grow with it)")
    print(f"prefilter: {skip_ratio(files):.1%} of the files are never parsed")
    if args.profile:
        return write_profile(files, args.profile)

    runs: dict[str, Run] = {}
    check = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--exit-zero", "-q"]
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    with tempfile.TemporaryDirectory() as cache:
        version = linter_fingerprint()
        runs["cold"] = measure("fsdp2-lint check (cold)", [*check, *jobs, "--cache-dir", cache], files)
        runs["warm"] = measure("fsdp2-lint check (warm)", [*check, *jobs, "--cache-dir", cache], files)
        if linter_fingerprint() != version:
            print("WARNING: the linter's source changed between the cold and the warm run: run again")
    runs["serial"] = measure("fsdp2-lint check --jobs 1 --no-cache", [*check, "--jobs", "1", "--no-cache"], files)
    if args.ruff:
        select = ["--no-cache", "--isolated", "--exit-zero", "--quiet", "--select", args.ruff_rule]
        runs["ruff"] = measure(f"ruff check --select {args.ruff_rule}", [args.ruff, "check", *select], files)
    else:
        print("ruff: not found (pip install ruff into a separate venv and put it on PATH, or pass --ruff)")
    if args.fixit and not args.no_fixit:
        runs["fixit"] = measure(
            f"fixit lint ({args.fixit_rule})", [args.fixit, "--rules", args.fixit_rule, "lint"], files
        )
    elif not args.no_fixit:
        print("fixit: not found (pip install fixit into a separate venv and put it on PATH, or pass --fixit)")

    print(f"\n{'tool':45} {'wall s':>8} {'CPU s':>8} {'files/s':>9} {'lines/s':>10} {'peak RSS MB':>12}")
    for run in runs.values():
        print(
            f"{run.tool:45} {run.seconds:8.2f} {run.cpu_seconds:8.2f} {len(files) / run.seconds:9.0f} "
            f"{lines / run.seconds:10.0f} {run.peak_rss_mb:12.0f}"
            + (f"  (exit {run.status})" if run.status not in (0, 1) else "")
        )
    print()
    ratios = {"cold_vs_warm": runs["cold"].seconds / runs["warm"].seconds}
    if "ruff" in runs:
        ratios["cold_vs_ruff"] = runs["cold"].seconds / runs["ruff"].seconds
    if "fixit" in runs:
        ratios["fixit_vs_cold"] = runs["fixit"].seconds / runs["cold"].seconds
    for label, key, target, higher in TARGETS:
        if key in ratios:
            met = ratios[key] >= target if higher else ratios[key] <= target
            sign = ">=" if higher else "<="
            print(f"{label:30} {ratios[key]:8.2f}   target {sign} {target:g}   {'met' if met else 'MISSED'}")
    peak = max(runs[key].peak_rss_mb for key in ("cold", "warm", "serial"))
    print(f"{'peak RSS of one check process':30} {peak:8.0f}   target < {RSS_TARGET_MB} MB   "
          f"{'met' if peak < RSS_TARGET_MB else 'MISSED'}")  # fmt: skip
    return 0


def write_profile(files: list[Path], path: Path) -> int:
    """cProfile's cumulative table of one cold ``check --jobs 1`` (in one process) of ``files``."""
    import pstats

    with tempfile.TemporaryDirectory() as folder:
        stats = Path(folder) / "check.prof"
        command = [sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "fsdp2_lint", "check", "--isolated"]
        subprocess.run([*command, "--exit-zero", "-q", "--jobs", "1", "--no-cache", *map(str, files)], check=True)
        table = io.StringIO()
        pstats.Stats(str(stats), stream=table).strip_dirs().sort_stats("cumulative").print_stats(PROFILED_FUNCTIONS)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# bench/lint_speed.py --profile: a cold `check --jobs 1` of {len(files)} files\n{table.getvalue()}"
    )
    print(f"profile written to {path}")
    return 0


def corpus_roots(args: argparse.Namespace) -> list[Path]:
    roots = list(args.corpus)
    if not args.no_torch:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("torch is not installed: pass corpus directories and --no-torch")
        roots.append(Path(next(iter(spec.submodule_search_locations))))
    return roots


def corpus_files(roots: list[Path], with_torch: bool, sample: int | None) -> list[Path]:
    args = argparse.Namespace(corpus=roots, no_torch=not with_torch)
    files = sorted({path for root in corpus_roots(args) for path in root.rglob("*.py") if path.is_file()})
    if sample and len(files) > sample:
        files = files[:: len(files) // sample]
    return files


def linter_fingerprint() -> str:
    """What keys the cache (in a fresh process: the source may change while the benchmark runs)."""
    code = "from fsdp2_lint.cache import linter_fingerprint; print(linter_fingerprint())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def skip_ratio(files: list[Path]) -> float:
    from fsdp2_lint.prefilter import applicable_rules
    from fsdp2_lint.rule import all_rules

    return sum(not applicable_rules(all_rules(), path.read_bytes()) for path in files) / len(files)


def measure(tool: str, command: list[str], files: list[Path]) -> Run:
    """Wall time and peak RSS (ru_maxrss of the command: its largest process that was waited for)."""
    print(f"running {tool} ...", flush=True)
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen([*command, *map(str, files)], stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            errors.seek(0)
            print(errors.read().decode(errors="replace")[-2000:], file=sys.stderr)
    rss_unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return Run(tool, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * rss_unit / 2**20, code)


if __name__ == "__main__":
    sys.exit(main())
