"""Everything that runs inside a rank process, and the only part of fsdp2-lint that imports torch.

Entry points: :mod:`.main` (one rank under torchrun) and :mod:`.server` (a pooled rank server that
imports torch once and forks a child per run); both run the script through :mod:`.script`, which
installs the probes of :mod:`.probes` (built on :mod:`.probe_core`, with :mod:`.fsdp1_probes` and
:mod:`.value_probes`) and writes events through :mod:`fsdp2_lint.runtime.evidence`.
:mod:`.tensors` holds the tensor helpers the probes share. Every module here imports torch
(:mod:`.server` inside functions, before it forks); the launchers start these modules by path.
"""
