"""Static linting speed: `fsdp2-lint check` (cold and warm cache) against Ruff with one rule and
Fixit, on the same files, side by side in one run.

    python bench/lint_speed.py                      # the installed torch package's sources
    python bench/lint_speed.py bench-corpus/        # plus repositories from bench/fetch_corpus.py
    python bench/lint_speed.py bench-corpus/* --each --no-fixit   # each root on its own, then the sum

Ruff and Fixit are found on PATH (or --ruff/--fixit); keep them out of the project's environment:
    python -m venv bench-venv && bench-venv/bin/pip install ruff fixit
    PATH="$PWD/bench-venv/bin:$PATH" python bench/lint_speed.py

Prints wall time, CPU time, files/s, lines/s and peak RSS per tool, the prefilter's skip ratio, and
the ratios README's performance targets set (Performance, "Latest figures"). Each tool gets the same
explicit list of files. With --each every root (a repository, torch's sources) is linted by its own
runs, as a project's CI would lint it, and the ratios are given per root and for the sums.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TARGETS = (  # (label, ratio, target, higher is better)
    ("cold check / Ruff one rule, wall", "cold_vs_ruff", 10.0, False),
    ("cold check / Ruff one rule, CPU", "cold_vs_ruff_cpu", 10.0, False),
    ("warm check / Ruff one rule, wall", "warm_vs_ruff", 1.0, False),
    ("Fixit / cold check, wall", "fixit_vs_cold", 20.0, True),
    ("cold / warm check, wall", "cold_vs_warm", 10.0, True),
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
    stderr: str = ""  # its end, for what a tool says it checked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="*", type=Path, help="directories of Python files (added to torch's)")
    parser.add_argument("--no-torch", action="store_true", help="leave out the installed torch package's sources")
    parser.add_argument("--each", action="store_true", help="time each root on its own (then the sums)")
    parser.add_argument("--sample", type=int, help="lint every k-th file so that about this many are linted")
    parser.add_argument("--jobs", type=int, help="fsdp2-lint --jobs (default: all cores)")
    parser.add_argument("--serial", action="store_true", help="also time `check --jobs 1 --no-cache`")
    parser.add_argument("--ruff", default=shutil.which("ruff"), help="ruff executable (default: from PATH)")
    parser.add_argument("--ruff-rule", default="E9", help="the one Ruff rule to run (default: E9, a full parse)")
    parser.add_argument("--fixit", default=shutil.which("fixit"), help="fixit executable (default: from PATH)")
    parser.add_argument("--fixit-rule", default="fixit.rules:NoRedundantFString")
    parser.add_argument("--no-fixit", action="store_true", help="skip Fixit (it takes minutes on a large corpus)")
    parser.add_argument("--profile", type=Path, help="only write where a cold serial check's time goes to this file")
    args = parser.parse_args()

    roots = corpus_roots(args)
    groups = {str(root): corpus_files([root], args.sample) for root in roots} if args.each else {}
    groups = {name: files for name, files in groups.items() if files}
    everything = sorted({path for files in groups.values() for path in files}) or corpus_files(roots, args.sample)
    if not everything:
        parser.error("no Python files found")
    print(f"corpus: {len(everything)} files, {count_lines(everything)} lines, from {', '.join(map(str, roots))}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start (wall times grow with it)")
    print(f"prefilter: {skip_ratio(everything):.1%} of the files are never parsed")
    if args.profile:
        return write_profile(everything, args.profile)
    if not args.ruff:
        print("ruff: not found (pip install ruff into a separate venv and put it on PATH, or pass --ruff)")
    if not (args.fixit or args.no_fixit):
        print("fixit: not found (pip install fixit into a separate venv and put it on PATH, or pass --fixit)")

    timed: dict[str, dict[str, Run]] = {}
    for name, files in (groups or {"corpus": everything}).items():
        timed[name] = time_tools(files, args)
        report(name, timed[name], files)
    if len(timed) > 1:
        report("sum of the roots", summed(timed.values()), everything)
    return 0


def time_tools(files: list[Path], args: argparse.Namespace) -> dict[str, Run]:
    """Each tool's run over ``files``: fsdp2-lint cold and warm (a fresh cache), Ruff, Fixit."""
    runs: dict[str, Run] = {}
    check = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--exit-zero", "-q"]
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    with tempfile.TemporaryDirectory() as cache:
        version = linter_fingerprint()
        runs["cold"] = measure("fsdp2-lint check (cold)", [*check, *jobs, "--cache-dir", cache], files)
        runs["warm"] = measure("fsdp2-lint check (warm)", [*check, *jobs, "--cache-dir", cache], files)
        if linter_fingerprint() != version:
            print("WARNING: the linter's source changed between the cold and the warm run: run again")
    if args.serial:
        runs["serial"] = measure("fsdp2-lint check --jobs 1 --no-cache", [*check, "--jobs", "1", "--no-cache"], files)
    if args.ruff:
        select = ["--no-cache", "--isolated", "--exit-zero", "--quiet", "--select", args.ruff_rule]
        runs["ruff"] = measure(f"ruff check --select {args.ruff_rule}", [args.ruff, "check", *select], files)
    if args.fixit and not args.no_fixit:
        fixit = [args.fixit, "--rules", args.fixit_rule, "lint"]
        run = measure(f"fixit lint ({args.fixit_rule})", fixit, files)
        checked = fixit_checked(run.stderr)
        if checked == len(files):
            runs["fixit"] = run
        else:  # Fixit silently skips files it judges not the project's (those under site-packages)
            print(f"WARNING: Fixit checked {checked} of the {len(files)} files: its timing is left out")
    return runs


def fixit_checked(summary: str) -> int | None:
    """How many files Fixit's closing line says it checked (``🧼 12 files clean 🧼``, ``🛠️ 3 files
    checked, 1 file with errors``); None when there is no such line."""
    found = re.findall(r"(\d+) files? (?:checked|clean)", summary)
    return int(found[-1]) if found else None


def summed(groups: Iterable[dict[str, Run]]) -> dict[str, Run]:
    """The runs of every root added up, tool by tool (peak RSS: the largest)."""
    total: dict[str, Run] = {}
    for runs in groups:
        for key, run in runs.items():
            before = total.get(key, Run(run.tool, 0.0, 0.0, 0.0, 0))
            total[key] = Run(
                run.tool, before.seconds + run.seconds, before.cpu_seconds + run.cpu_seconds,
                max(before.peak_rss_mb, run.peak_rss_mb), max(before.status, run.status),
            )  # fmt: skip
    return total


def report(name: str, runs: dict[str, Run], files: list[Path]) -> None:
    lines = count_lines(files)
    print(f"\n{name}: {len(files)} files, {lines} lines")
    print(f"{'tool':45} {'wall s':>8} {'CPU s':>8} {'files/s':>9} {'lines/s':>10} {'peak RSS MB':>12}")
    for run in runs.values():
        print(
            f"{run.tool:45} {run.seconds:8.2f} {run.cpu_seconds:8.2f} {len(files) / run.seconds:9.0f} "
            f"{lines / run.seconds:10.0f} {run.peak_rss_mb:12.0f}"
            + (f"  (exit {run.status})" if run.status not in (0, 1) else "")
        )
    for label, ratio, target, higher in TARGETS:
        value = ratios(runs).get(ratio)
        if value is not None:
            met = value >= target if higher else value <= target
            sign = ">=" if higher else "<="
            print(f"{label:36} {value:8.2f}   target {sign} {target:g}   {'met' if met else 'MISSED'}")
    peak = max(run.peak_rss_mb for key, run in runs.items() if key in ("cold", "warm", "serial"))
    print(f"{'peak RSS of one check process':36} {peak:8.0f}   target < {RSS_TARGET_MB} MB   "
          f"{'met' if peak < RSS_TARGET_MB else 'MISSED'}")  # fmt: skip


def ratios(runs: dict[str, Run]) -> dict[str, float]:
    cold, warm = runs["cold"], runs["warm"]
    found = {"cold_vs_warm": cold.seconds / warm.seconds}
    if "ruff" in runs:
        ruff = runs["ruff"]
        found |= {"cold_vs_ruff": cold.seconds / ruff.seconds, "warm_vs_ruff": warm.seconds / ruff.seconds}
        found["cold_vs_ruff_cpu"] = cold.cpu_seconds / ruff.cpu_seconds
    if "fixit" in runs:
        found["fixit_vs_cold"] = runs["fixit"].seconds / cold.seconds
    return found


def count_lines(files: list[Path]) -> int:
    return sum(path.read_bytes().count(b"\n") for path in files)


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


def corpus_files(roots: list[Path], sample: int | None) -> list[Path]:
    files = sorted({path for root in roots for path in root.rglob("*.py") if path.is_file()})
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
        errors.seek(0)
        said = errors.read()[-2000:].decode(errors="replace")
        if code not in (0, 1):
            print(said, file=sys.stderr)
    rss_unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return Run(tool, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * rss_unit / 2**20, code, said)


if __name__ == "__main__":
    sys.exit(main())
