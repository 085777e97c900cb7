"""What runs in the processes that import torch — the ranks — and the only part of fsdp2-lint that
imports it (every module here does; :mod:`.server` inside functions, before it forks).

Entry points, which the launchers start by module path and nothing imports: :mod:`.main` (one rank
under torchrun), :mod:`.server` (a pooled rank server that imports torch once and forks a child per
run) and :mod:`.gpus` (the GPU count the torchrun launcher needs first). Both rank entry points run
the script through :mod:`.script`, which installs the probes of :mod:`.probes` (built on
:mod:`.probe_core`, with :mod:`.fsdp1_probes` and :mod:`.value_probes`; tensor helpers in
:mod:`.tensors`) and writes events through :mod:`fsdp2_lint.runtime.evidence`.
"""
