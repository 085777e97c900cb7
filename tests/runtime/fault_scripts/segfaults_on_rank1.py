"""Rank 1 dies of SIGSEGV while rank 0 waits for it in a barrier: rank 0 then fails with gloo's
"Connection reset by peer", a consequence of rank 1's death."""

import os
import signal

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGSEGV)
dist.barrier()
