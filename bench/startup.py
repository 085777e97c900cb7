"""Start-up: `fsdp2-lint check one_file.py` on a file the prefilter rejects (what pre-commit runs on
most commits), against `ruff check --no-cache --select E9` on the same file and against the
interpreter's own start (`python -c pass`, the same Python).

    python bench/startup.py [--runs 20] [--ruff PATH] [--file PATH] [--baseline OTHER_FSDP2_LINT] [--profile FILE]

Every command runs in turn, round after round, so that a busy machine slows them alike; each is a
whole process, as a hook starts it. Prints the median and the fastest wall time of each, and their
ratios measured in this run, and what the linter's run imported (modules, and whether the parser or
rich's markdown was among them: it must not be). Target (issue 20): 100 ms wall.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 100
PROFILED_IMPORTS = 60
PROFILE_RUNS = 7  # each module's fastest import over these runs: steadier than one run on a busy machine
# A module of a training project that no rule can fire on: no sharding, no collective, no rank test.
CLEAN = '''\
"""Data loading for the training script."""
import json
import os
from dataclasses import dataclass


@dataclass
class Sample:
    path: str
    label: int


def samples(root):
    with open(os.path.join(root, "labels.json")) as handle:
        labels = json.load(handle)
    return [Sample(os.path.join(root, name), labels[name]) for name in sorted(labels)]


def batches(items, size):
    for start in range(0, len(items), size):
        yield items[start : start + size]
'''
RECORD = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: open({out!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "from fsdp2_lint.cli import main\n"
    "main()\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="rounds (default: 20)")
    default_ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    parser.add_argument("--ruff", default=default_ruff, help="ruff executable (default: from PATH or beside python)")
    parser.add_argument("--file", type=Path, help="the file to check (default: a generated module no rule fires on)")
    parser.add_argument("--baseline", help="another fsdp2-lint executable to time alike (an older install)")
    parser.add_argument("--profile", type=Path,
                        help="also write the run's imports, slowest first (-X importtime, fastest of 7 runs)")  # fmt: skip
    args = parser.parse_args()
    linter = shutil.which("fsdp2-lint", path=str(Path(sys.executable).parent)) or shutil.which("fsdp2-lint")
    if linter is None:
        sys.exit("fsdp2-lint is not installed beside this python")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        file = args.file.resolve() if args.file else work / "data.py"
        if not args.file:
            file.write_text(CLEAN, encoding="utf-8")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "fsdp2-lint check": [linter, "check", str(file)],
            "ruff check --select E9": [args.ruff, "check", "--no-cache", "--isolated", "--select", "E9", str(file)]
            if os.path.exists(args.ruff)
            else None,
        }
        if args.baseline:
            commands["baseline fsdp2-lint check"] = [args.baseline, "check", str(file)]
        commands = {name: command for name, command in commands.items() if command is not None}
        if "ruff check --select E9" not in commands:
            print(f"ruff: not found at {args.ruff} (pass --ruff)")
        # Compiled modules as an installed package has them: written once (by the untimed run, which
        # also warms the file system cache) to a folder of this run, whatever PYTHONDONTWRITEBYTECODE says.
        environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        environment["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        for command in commands.values():
            subprocess.run(command, cwd=work, capture_output=True, check=False, env=environment)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}  # user + system: steadier on a busy machine
        for _ in range(args.runs):
            for name, command in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(command, cwd=work, capture_output=True, check=False, env=environment)
                times[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        modules = _imported(file, work)
        if args.profile:
            _write_import_profile(file, work, environment, args.profile)
    print(f"{args.runs} rounds, {file.name} ({file.stat().st_size if file.exists() else len(CLEAN)} bytes)")
    print(f"{'command':<26} {'median ms':>10} {'fastest ms':>11} {'median CPU ms':>14}")
    for name, seconds in times.items():
        line = f"{name:<26} {statistics.median(seconds) * 1000:>10.1f} {min(seconds) * 1000:>11.1f}"
        print(f"{line} {statistics.median(cpu[name]) * 1000:>14.1f}")
    median = {name: statistics.median(seconds) for name, seconds in times.items()}
    ours = median["fsdp2-lint check"]
    print(f"fsdp2-lint check less python's own start: {(ours - median['python -c pass']) * 1000:.1f} ms")
    if "ruff check --select E9" in median:
        ruff_cpu = statistics.median(cpu["ruff check --select E9"])
        ratio_cpu = statistics.median(cpu["fsdp2-lint check"]) / ruff_cpu if ruff_cpu else float("inf")
        print(
            f"fsdp2-lint check / ruff check: {ours / median['ruff check --select E9']:.1f}x wall, {ratio_cpu:.1f}x CPU"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print(f"target {TARGET_MS} ms wall: {ours * 1000:.1f} ms, {'met' if ours * 1000 <= TARGET_MS else 'missed'}")
    heavy = [name for name in ("libcst", "rich.markdown", "fsdp2_lint.analysis.interpreter") if _has(modules, name)]
    rules = [name for name in modules if name.startswith("fsdp2_lint.rules.fsdp")]
    print(f"modules imported: {len(modules)}; parser, markdown or interpreter among them: {heavy or 'none'}; "
          f"rule modules: {len(rules)}")  # fmt: skip
    return 0


def _imported(file: Path, work: Path) -> list[str]:
    out = work / "modules.json"
    command = [sys.executable, "-c", RECORD.format(out=str(out)), "check", str(file)]
    subprocess.run(command, cwd=work, capture_output=True, check=False)
    return json.loads(out.read_text())


def _write_import_profile(file: Path, work: Path, environment: dict[str, str], path: Path) -> None:
    """What ``check`` imports, by cumulative import time (Python's ``-X importtime``), slowest first:
    each module's fastest cumulative and own time over ``PROFILE_RUNS`` runs."""
    command = [sys.executable, "-X", "importtime", "-m", "fsdp2_lint", "check", str(file)]
    fastest: dict[str, tuple[int, int]] = {}
    for _ in range(PROFILE_RUNS):
        stderr = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False, env=environment).stderr
        for line in stderr.splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                name, cumulative, own = parts[2].rstrip(), int(parts[1]), int(parts[0])
                best = fastest.get(name, (cumulative, own))
                fastest[name] = (min(best[0], cumulative), min(best[1], own))
    rows = sorted(((cumulative, own, name) for name, (cumulative, own) in fastest.items()), reverse=True)
    table = "\n".join(f"{cumulative:>10} {own:>8} {name}" for cumulative, own, name in rows[:PROFILED_IMPORTS])
    header = (
        f"# bench/startup.py --profile: `fsdp2-lint check {file.name}`, -X importtime, "
        f"each module's fastest of {PROFILE_RUNS} runs, load average {os.getloadavg()[0]:.1f}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{header}{'cumulative':>10} {'self':>8} module (microseconds)\n{table}\n")
    print(f"import profile written to {path}")


def _has(modules: list[str], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in modules)


if __name__ == "__main__":
    sys.exit(main())
