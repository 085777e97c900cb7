"""Each rank starts survivors (see survivors.py) and then ends normally."""

from survivors import rank_ready, spawn_survivors

spawn_survivors()
rank_ready()
