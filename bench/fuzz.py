"""The long fuzz run: the seeded fuzzer of `tests/support/fuzzing.py` with a large budget.

    python bench/fuzz.py                          # 10,000 programs, seed 0
    python bench/fuzz.py --programs 2000 --seed 5

Each program (a mutant of a shipped fixture or a program generated from a grammar of FSDP2 code) is
linted, rendered in every output format and fixed; it prints how many programs each generator made,
the properties broken (with the seed and index that rebuild the program: `fuzzing.program(SEED,
INDEX)`), and the programs per second. Exit status 1 when any property broke.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from fuzzing import check, programs  # noqa: E402 - tests/support/ is put on the path above


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=10_000, help="how many programs (default: 10,000)")
    parser.add_argument("--seed", type=int, default=0, help="the seed (default: 0)")
    args = parser.parse_args()

    made: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    start = time.perf_counter()
    for program in programs(args.seed, args.programs):
        made[program.how] += 1
        problems.extend(check(program))
    seconds = time.perf_counter() - start
    print(f"seed {args.seed}: {args.programs} programs ({', '.join(f'{n} {how}' for how, n in sorted(made.items()))})")
    print(f"{len(problems)} broken properties; {args.programs / seconds:.0f} programs/s")
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
