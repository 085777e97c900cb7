"""A module in the current directory named like one the harness imports: it must never run."""

import os

open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imported-argparse"), "w").close()
raise ImportError("the current directory's argparse.py was imported")
