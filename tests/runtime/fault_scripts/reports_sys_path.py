"""Writes the rank's sys.path and working directory to sys_path-rank<R>.json in the working directory."""

import json
import os
import sys

with open(f"sys_path-rank{os.environ['RANK']}.json", "w") as report:
    json.dump({"sys_path": sys.path, "cwd": os.getcwd()}, report)
