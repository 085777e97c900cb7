"""What a file of mutually calling helpers costs to lint: CPU seconds, same-file calls expanded
and calls answered from a summary, for the function and the method cluster of
``tests/support/samples.py`` (each helper calls the next ``--fan-out`` ones, an exponential call tree).

    python bench/call_cost.py
    python bench/call_cost.py --helpers 40 --fan-out 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from samples import CLUSTERS, FAN_OUT, HELPERS  # noqa: E402 - tests/support/ is put on the path above

from fsdp2_lint.engine import lint_source  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--helpers", type=int, default=HELPERS)
    parser.add_argument("--fan-out", type=int, default=FAN_OUT)
    parser.add_argument("--repeat", type=int, default=3, help="runs per cluster; the fastest is reported")
    args = parser.parse_args()
    print(f"{'cluster':<10} {'KB':>6} {'CPU s':>8}")
    for kind, (make_cluster, call) in CLUSTERS.items():
        source = f"from torch.distributed.fsdp import fully_shard\n{make_cluster(args.helpers, args.fan_out)}{call}\n"
        times = []
        for _ in range(args.repeat):
            start = time.process_time()
            lint_source(source.encode(), "helpers.py")
            times.append(time.process_time() - start)
        print(f"{kind:<10} {len(source) / 1024:>6.1f} {min(times):>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
