import os
import sys

# `python -m fsdp2_lint` puts the working directory first on sys.path: a project's own signal.py or
# json.py would run instead of the standard library's (pip's __main__ drops it the same way)
if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from fsdp2_lint.cli import main  # noqa: E402

main()
