"""Runtime confirmation speed: the CPU confirmation suite with the pool launcher (rank servers
import torch once and fork each fixture run) against one `torchrun` per fixture, side by side.

    python bench/confirm_speed.py                       # every rule's fixtures (minutes)
    python bench/confirm_speed.py --rule FSDP001 --rule FSDP005   # a quick subset

Needs torch (CPU is enough). Prints each launcher's wall time, fixtures per minute and verdicts,
and the ratio README's performance targets set (torchrun / pool >= 4). Both runs use the same --jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TARGET = 4.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rule", action="append", default=[], help="only this rule's fixtures (repeatable)")
    parser.add_argument("--jobs", type=int, help="fixture runs at a time, for both launchers (default: confirm's)")
    args = parser.parse_args()

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    results = {launcher: confirm(launcher, args.rule, args.jobs) for launcher in ("pool", "torchrun")}
    print(f"\n{'launcher':10} {'wall s':>8} {'fixtures':>9} {'per minute':>11}  verdicts")
    for launcher, (seconds, report) in results.items():
        fixtures = len(report["results"])
        summary = ", ".join(f"{count} {verdict}" for verdict, count in report["summary"].items() if count)
        print(f"{launcher:10} {seconds:8.1f} {fixtures:9} {fixtures / seconds * 60:11.1f}  {summary}")
    verdicts = {
        launcher: {(r["rule"], r["fixture"]): r["verdict"] for r in report["results"]}
        for launcher, (_, report) in results.items()
    }
    differing = sorted(key for key in verdicts["pool"] if verdicts["pool"][key] != verdicts["torchrun"].get(key))
    for rule, fixture in differing:
        print(f"verdicts differ: {rule}/{fixture}: pool {verdicts['pool'][(rule, fixture)]}, "
              f"torchrun {verdicts['torchrun'].get((rule, fixture))}")  # fmt: skip
    ratio = results["torchrun"][0] / results["pool"][0]
    met = "met" if ratio >= TARGET else "MISSED"
    print(f"\ntorchrun / pool: {ratio:.2f}   target >= {TARGET:g}   {met}")
    return 0


def confirm(launcher: str, rules: list[str], jobs: int | None) -> tuple[float, dict]:
    command = [sys.executable, "-m", "fsdp2_lint", "confirm", "--device", "cpu", "--launcher", launcher]
    command += ["--output-format", "json", *(f"--rule={rule}" for rule in rules)]
    if jobs:
        command += ["--jobs", str(jobs)]
    print(f"running confirm --launcher {launcher} ...", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"confirm --launcher {launcher} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)


if __name__ == "__main__":
    sys.exit(main())
