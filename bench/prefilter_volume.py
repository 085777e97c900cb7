"""What the prefilter admits for parsing: files and bytes, per file (`--no-follow-imports`), and how
much of it is admitted for FSDP007 alone (no other selected rule can fire on the file). With
`--follow-imports`, also what a run that follows imports admits (a file is judged with the project
modules it imports) and how many files only those modules admit.

    python bench/prefilter_volume.py [ROOT ...]    # default: the installed torch package's sources
    python bench/prefilter_volume.py --follow-imports bench-precision/NVIDIA+NeMo

Reads the files and runs the token prefilter only: no parsing, so it takes seconds (with
`--follow-imports`, also finding each file's import closure).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

from fsdp2_lint.analysis.project import Projects
from fsdp2_lint.engine import InProject, applicable_in, parseable
from fsdp2_lint.prefilter import applicable_rules
from fsdp2_lint.rule import rule_heads

COLLECTIVE_RULE = "FSDP007"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", type=Path, help="folders to read (default: torch's sources)")
    parser.add_argument("--follow-imports", action="store_true", help="judge each file with what it imports too")
    args = parser.parse_args()
    roots = args.roots or [_torch_sources()]
    heads = rule_heads()
    projects = Projects(None, parseable) if args.follow_imports else None
    start = time.process_time()
    files = total = admitted = admitted_bytes = alone = alone_bytes = followed = through_imports = 0
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            files += 1
            total += len(data)
            codes = [head.code for head in applicable_rules(heads, data)]
            if projects is not None and _admitted_following(projects, path, data, heads):
                followed += 1
                through_imports += not codes
            if codes:
                admitted += 1
                admitted_bytes += len(data)
                if codes == [COLLECTIVE_RULE]:
                    alone += 1
                    alone_bytes += len(data)
    seconds = time.process_time() - start
    print(f"roots: {', '.join(map(str, roots))}")
    print(f"files read: {files:,} ({total / 1e6:.1f} MB), prefilter CPU {seconds:.1f} s")
    print(f"admitted: {admitted:,} files ({admitted_bytes / 1e6:.2f} MB, {100 * admitted_bytes / max(total, 1):.1f}%)")
    print(f"admitted for {COLLECTIVE_RULE} alone: {alone:,} files ({alone_bytes / 1e6:.2f} MB)")
    if projects is not None:
        print(f"admitted following imports: {followed:,} files, {through_imports:,} of them only through the modules they import")
    return 0


def _admitted_following(projects: Projects, path: Path, data: bytes, heads: list) -> bool:
    file = Path(os.path.realpath(path))
    project = projects.for_file(file)
    return bool(applicable_in(heads, data, InProject(project, file)))


def _torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: name the folders to read")
    return Path(spec.origin).parent


if __name__ == "__main__":
    sys.exit(main())
