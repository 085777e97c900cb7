"""Precision guard: lint the public FSDP2 repositories at their pinned commits, print every finding
next to its review, and fail on any finding nobody has reviewed.

    python bench/fetch_corpus.py --precision bench-precision     # needs git and network
    python bench/precision_corpus.py bench-precision              # [--jobs N] [--repository OWNER/NAME]

The reviews live in bench/precision_reviewed.toml: one [[finding]] per (repository, path, line,
code), with `verdict = "true"` and a one-line reason, or `verdict = "false"` for a false positive
not fixed yet (with why). A new finding is a difference to review (exit 1); a reviewed true
positive that is no longer found is a lost catch (exit 1); a reviewed false positive that is no
longer found is fixed (say so by removing its entry). CI cannot reach these repositories: every
false-positive class fixed here also becomes style cases in the suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fetch_corpus import PRECISION_REPOSITORIES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REVIEWED = Path(__file__).with_name("precision_reviewed.toml")


@dataclass(frozen=True)
class Key:
    repository: str
    path: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"{self.repository}: {self.path}:{self.line} {self.code}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, nargs="?", default=Path("bench-precision"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repository", action="append", help="only this OWNER/NAME (repeatable)")
    parser.add_argument("--reviewed", type=Path, default=REVIEWED)
    args = parser.parse_args()
    reviews = load_reviews(args.reviewed)
    repositories = args.repository or list(PRECISION_REPOSITORIES)
    unknown = sorted(set(repositories) - set(PRECISION_REPOSITORIES))
    if unknown:
        parser.error(f"not in the precision corpus: {', '.join(unknown)}")
    linted = [name for name in repositories if (args.corpus / folder_name(name)).is_dir()]
    for name in sorted(set(repositories) - set(linted)):
        print(f"{name}: not fetched (python bench/fetch_corpus.py --precision {args.corpus})")
    if not linted:
        return 2
    found: dict[Key, str] = {}
    for name in linted:
        found |= lint_repository(name, args.corpus / folder_name(name), args.jobs)
    return compare(found, {key: review for key, review in reviews.items() if key.repository in linted})


def folder_name(repository: str) -> str:
    return repository.replace("/", "+")


def load_reviews(path: Path) -> dict[Key, dict]:
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("finding", [])
    reviews = {}
    for entry in entries:
        if entry.get("verdict") not in ("true", "false") or not entry.get("reason"):
            raise SystemExit(f"{path}: every finding needs verdict 'true' or 'false' and a reason: {entry}")
        reviews[Key(entry["repository"], entry["path"], entry["line"], entry["code"])] = entry
    return reviews


def lint_repository(name: str, folder: Path, jobs: int) -> dict[Key, str]:
    """Every finding of `check` on the repository (the project's whole analysis, as a user runs it)."""
    command = [sys.executable, "-m", "fsdp2_lint", "check", ".", "--isolated", "--no-cache"]
    command += ["--output-format", "json", "--exit-zero", "--jobs", str(jobs)]
    started = time.monotonic()
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name}: fsdp2-lint check failed ({result.returncode}):\n{result.stderr[-2000:]}")
    findings = {Key(name, d["path"], d["line"], d["code"]): d["message"] for d in json.loads(result.stdout)}
    files = list(folder.rglob("*.py"))
    lines = sum(len(path.read_bytes().splitlines()) for path in files)
    print(f"{name} @ {PRECISION_REPOSITORIES[name]}: {len(files):,} files, {lines:,} lines, "
          f"{len(findings)} findings, {time.monotonic() - started:.0f} s")  # fmt: skip
    return findings


def compare(found: dict[Key, str], reviews: dict[Key, dict]) -> int:
    true = [key for key in found if key in reviews and reviews[key]["verdict"] == "true"]
    false = [key for key in found if key in reviews and reviews[key]["verdict"] == "false"]
    new = [key for key in found if key not in reviews]
    lost = [key for key, review in reviews.items() if key not in found and review["verdict"] == "true"]
    fixed = [key for key, review in reviews.items() if key not in found and review["verdict"] == "false"]
    print()
    for key in sorted(found, key=str):
        review = reviews.get(key)
        status = "NEW, not reviewed" if review is None else f"{review['verdict']}: {review['reason']}"
        print(f"{key}  [{status}]\n    {found[key]}")
    for key in lost:
        print(f"{key}  [LOST: a reviewed true positive is no longer found]")
    for key in fixed:
        print(f"{key}  [fixed: remove it from {REVIEWED.name}]")
    reviewed = len(true) + len(false)
    precision = f"{len(true) / reviewed:.2f}" if reviewed else "n/a"
    print(f"\n{len(found)} findings: {len(true)} true, {len(false)} known false, {len(new)} new; "
          f"{len(lost)} lost, {len(fixed)} fixed; precision of the reviewed {precision}")  # fmt: skip
    return 1 if new or lost else 0


if __name__ == "__main__":
    sys.exit(main())
