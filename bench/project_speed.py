"""Project analysis speed: `fsdp2-lint check` on a whole multi-module repository, cold, warm, after
one helper module was edited, and cold again with `--no-follow-imports`, side by side in one run.

    python bench/project_speed.py                                   # bench-corpus/pytorch+torchtitan
    python bench/project_speed.py bench-corpus/verl-project+verl --jobs 1
    python bench/project_speed.py REPO --module torchtitan/tools/logging.py

The repository is copied to a temporary folder first (the edit never touches the original); each
run is the real command line, in that copy, with a cache folder of its own. The helper edited is
the module with the most analysed files importing it (directly or through other modules, by the
project's own import resolution) unless --module names one; a function is appended to it.

What each run analysed is read from the cache folder (one new entry per file analysed, none for a
file the prefilter skips or the cache answers). The cache key of a file's result holds the text of
every project module it imports, so the edit must re-analyse exactly the files whose import
closure holds the edited module, plus the module itself: the script checks that and says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.analysis.project import Projects
from fsdp2_lint.cache import Cache
from fsdp2_lint.config import Selection
from fsdp2_lint.discovery import discover
from fsdp2_lint.engine import InProject, applicable_in, parseable
from fsdp2_lint.pipeline import LintTask, SettingsResolver, default_jobs

DEFAULT_REPOSITORY = Path("bench-corpus/pytorch+torchtitan")
EDIT = "\n\ndef _project_speed_edit():\n    return None\n"  # harmless: no token a rule looks for
CHECK = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--exit-zero", "-q"]


@dataclass
class Run:
    label: str
    seconds: float
    cpu_seconds: float  # user + system, of the command and the workers it waited for
    analysed: int  # files analysed: new cache entries


@dataclass
class Measurement:
    files: int  # files the command line lints
    admitted: list[str]  # the files the prefilter lets through to analysis or the cache
    edited: str  # the helper module edited
    importers: list[str]  # admitted files whose import closure holds it, and itself if admitted
    reanalysed: list[str]  # the files the edited run analysed, by their cache keys
    unexplained: int  # entries the edited run wrote that match no file's key (0 when all is well)
    importer_counts: list[int]  # for each linted file, how many admitted files import it (directly or not)
    runs: dict[str, Run]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", nargs="?", type=Path, default=DEFAULT_REPOSITORY)
    parser.add_argument("--jobs", type=int, help="fsdp2-lint --jobs (default: all cores, as the CLI)")
    parser.add_argument("--module", help="the helper to edit, relative to the repository (default: most imported)")
    args = parser.parse_args()
    if not args.repository.is_dir():
        parser.error(f"{args.repository} is not a folder (python bench/fetch_corpus.py fetches the corpus)")
    print(f"repository: {args.repository.resolve()}{commit_of(args.repository)}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start (wall times grow with it)")
    print(f"jobs: {args.jobs or default_jobs()}")
    result = measure_project(args.repository, args.jobs, args.module)
    report(result)
    return 0 if result.reanalysed == result.importers and not result.unexplained else 1


def commit_of(repository: Path) -> str:
    found = subprocess.run(["git", "-C", str(repository), "rev-parse", "--short=12", "HEAD"], capture_output=True)
    return f" @ {found.stdout.decode().strip()}" if found.returncode == 0 else ""


def measure_project(repository: Path, jobs: int | None = None, module: str | None = None) -> Measurement:
    """The four runs on a copy of ``repository``, and what the edited run re-analysed."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / repository.resolve().name
        copy_tree(repository, copy)
        files = lint_targets(copy)
        admitted = admitted_files(copy, files)
        imported = Counter(name for closure in admitted.values() for name in closure)
        edited = os.path.normpath(module) if module else most_imported(copy, imported)
        runs: dict[str, Run] = {}
        cache = Path(scratch) / "cache"
        runs["cold"] = timed("cold (empty cache)", copy, cache, jobs)
        runs["warm"] = timed("warm (cache filled)", copy, cache, jobs)
        before = entries(cache)
        with (copy / edited).open("a") as helper:
            helper.write(EDIT)
        after = admitted_files(copy, files)
        importers = sorted(name for name, closure in after.items() if name == edited or edited in closure)
        runs["edited"] = timed(f"one file edited ({edited})", copy, cache, jobs)
        written = entries(cache) - before
        keys = file_keys(copy, files, cache)
        reanalysed = sorted(name for name, key in keys.items() if key in written)
        runs["no-follow"] = timed("cold, --no-follow-imports", copy, Path(scratch) / "per-file", jobs, per_file=True)
        return Measurement(
            len(files),
            sorted(admitted),
            edited,
            importers,
            reanalysed,
            len(written - set(keys.values())),
            sorted(imported[os.path.normpath(path)] for path in files),
            runs,
        )


def copy_tree(source: Path, destination: Path) -> None:
    """The work tree without git's objects: an empty ``.git`` keeps the project root and which
    ``.gitignore`` files apply as they are in the original."""
    shutil.copytree(source, destination, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if (source / ".git").exists():
        (destination / ".git").mkdir()


def lint_targets(root: Path) -> list[Path]:
    """The files ``check .`` lints in ``root``, relative to it, found as the command line finds them."""
    resolver = resolver_for()
    with working_folder(root):
        found = discover([Path(".")], lambda path, is_dir: resolver.for_path(path, is_dir).is_excluded(path, is_dir))
        return [item for item in found if isinstance(item, Path)]


def resolver_for() -> SettingsResolver:
    return SettingsResolver(Selection(), isolated=True)


def tasks_of(files: list[Path]) -> list[tuple[LintTask, bytes]]:
    """Each file's task as the command line makes it (run in the repository's folder), with its bytes."""
    resolver = resolver_for()
    return [(LintTask.of(path, resolver.for_path(path), os.path.normpath(path)), path.read_bytes()) for path in files]


def in_project(projects: Projects, task: LintTask) -> InProject:
    file = Path(os.path.realpath(task.path))
    return InProject(projects.for_file(file, task.import_roots), file)


def closure_of(projects: Projects, task: LintTask, data: bytes) -> list[tuple[Path, bytes]]:
    """The project modules the file's analysis could read (its import closure), with their text."""
    where = in_project(projects, task)
    return where.project.imported_sources(where.file, data)


def admitted_files(root: Path, files: list[Path]) -> dict[str, set[str]]:
    """Each file the prefilter admits (and the size limit), with its import closure, named
    relative to ``root``."""
    projects = Projects(parseable=parseable)
    admitted: dict[str, set[str]] = {}
    with working_folder(root):
        for task, data in tasks_of(files):
            if applicable_in(task.rules, data, in_project(projects, task)) and len(data) <= task.max_file_size:
                admitted[task.display] = {os.path.relpath(path) for path, _ in closure_of(projects, task, data)}
    return admitted


def most_imported(root: Path, imported: Counter[str]) -> str:
    """The module (not a package's ``__init__.py``) that most admitted files import, directly or not."""
    helpers = [(count, module) for module, count in imported.items() if not module.endswith("__init__.py")]
    if not helpers:
        raise SystemExit(f"no analysed file in {root} imports another project module: nothing to edit")
    return max(helpers)[1]


def file_keys(root: Path, files: list[Path], cache_folder: Path) -> dict[str, str]:
    """The cache key of each file's result as the pipeline computes it (its bytes, name, rules and
    import closure), to tell which files a run's new entries belong to."""
    cache = Cache(cache_folder)
    projects = Projects(parseable=parseable)
    with working_folder(root):
        return {
            task.display: cache.key(data, task.display, task.rules, closure_of(projects, task, data))
            for task, data in tasks_of(files)
        }


def entries(cache: Path) -> set[str]:
    """The keys of the entries in a cache folder."""
    return {path.stem for path in cache.glob("v*/*/*.json")}


@contextmanager
def working_folder(folder: Path) -> Iterator[None]:
    """Run the block in ``folder``, where the command line runs: names are relative to it there."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def timed(label: str, root: Path, cache: Path, jobs: int | None, per_file: bool = False) -> Run:
    """Wall and CPU time of ``check .`` in ``root``, and how many files it analysed."""
    print(f"running {label} ...", flush=True)
    command = [*CHECK, "--cache-dir", str(cache), *(["--jobs", str(jobs)] if jobs else [])]
    command += ["--no-follow-imports"] if per_file else []
    before = entries(cache)
    start = time.perf_counter()
    process = subprocess.Popen([*command, "."], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: {' '.join(command)} failed\n{process.stderr.read().decode(errors='replace')}")
    process.stderr.close()
    return Run(label, seconds, usage.ru_utime + usage.ru_stime, len(entries(cache) - before))


def report(result: Measurement) -> None:
    runs = result.runs
    print(f"\nfiles linted: {result.files}; admitted by the prefilter: {len(result.admitted)}")
    counts = result.importer_counts
    print(
        f"admitted files importing a linted module (directly or not): median {statistics.median(counts):g}, "
        f"90th percentile {counts[len(counts) * 9 // 10]}, most {counts[-1]}"
    )
    print(f"\n{'run':60} {'wall s':>8} {'CPU s':>8} {'analysed':>9} {'from cache':>11}")
    for key, run in runs.items():
        cached = str(len(result.admitted) - run.analysed) if key in ("warm", "edited") else "-"
        print(f"{run.label:60} {run.seconds:8.2f} {run.cpu_seconds:8.2f} {run.analysed:9d} {cached:>11}")
    cold = runs["cold"]
    print()
    for label, run in (("warm / cold", runs["warm"]), ("edited / cold", runs["edited"])):
        print(f"{label:24} {run.seconds / cold.seconds:6.3f} wall   {run.cpu_seconds / cold.cpu_seconds:6.3f} CPU")
    per_file = runs["no-follow"]
    print(f"{'follow / no-follow':24} {cold.seconds / per_file.seconds:6.3f} wall   "
          f"{cold.cpu_seconds / per_file.cpu_seconds:6.3f} CPU")  # fmt: skip
    exact = result.reanalysed == result.importers and not result.unexplained
    print(
        f"\nedited {result.edited}: {len(result.importers)} admitted files hold it in their import closure "
        f"(itself included), {len(result.reanalysed)} were re-analysed: {'exactly those' if exact else 'MISMATCH'}"
    )
    if not exact:
        print(f"  re-analysed, not importers: {sorted(set(result.reanalysed) - set(result.importers))}")
        print(f"  importers, not re-analysed: {sorted(set(result.importers) - set(result.reanalysed))}")
        print(f"  entries that match no file: {result.unexplained}")


if __name__ == "__main__":
    sys.exit(main())
