"""Each rank ignores SIGTERM, SIGHUP and SIGINT, starts survivors (see survivors.py) and blocks
forever: only a timeout, or the harness being stopped, ends it."""

import signal

from survivors import ignore_termination, rank_ready, spawn_survivors

ignore_termination()
spawn_survivors()
rank_ready()
while True:
    signal.pause()
