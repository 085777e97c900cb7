"""Per-launch entry point of one rank, started by torchrun as ``python -m fsdp2_lint.runtime.rank.main
--run-dir DIR [--device auto|cpu|cuda] [--trace-lines] [--module NAME] [--import-root DIR]
[--project DIR] SCRIPT [ARGS...]`` without the current directory on sys.path (see :func:`fsdp2_lint.runtime.launch.processes.python_module`) (imports torch)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.device import DEVICE_CHOICES, DeviceUnavailable, choose_device
from fsdp2_lint.runtime.evidence.events import EventLog
from fsdp2_lint.runtime.rank.script import run_script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fsdp2_lint.runtime.rank.main")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    parser.add_argument("--trace-lines", action="store_true")
    parser.add_argument("--module", help="run this module as `python -m` would (SCRIPT is its file)")
    parser.add_argument("--import-root", type=Path, help="first on sys.path")
    parser.add_argument("--project", type=Path, help="the directory whose files are the user's code")
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    try:
        device = choose_device(options.device, world_size, torch.cuda.device_count())
    except DeviceUnavailable as error:
        EventLog(events.events_path(options.run_dir, rank)).write(events.HARNESS_ERROR, message=str(error))
        return 2
    return run_script(
        options.script,
        options.args,
        options.run_dir,
        rank,
        world_size,
        device,
        trace_lines=options.trace_lines,
        module=options.module,
        import_root=options.import_root,
        project=options.project,
    )


if __name__ == "__main__":
    sys.exit(main())
