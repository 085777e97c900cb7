"""Runtime confirmation harness: run training scripts under torchrun with probes and judge the run.

Four layers, imports running downward only:

- :mod:`.harness` — the parent side of ``fsdp2-lint confirm``: the command, fixture discovery,
  running fixtures or a script, verdicts, reports.
- :mod:`.launch` — the launchers (pooled rank servers, or one torchrun per run) behind one
  interface, stall detection, and the processes that keep every run contained.
- :mod:`.evidence` — the contract between ranks and harness: event kinds, run records, the
  evidence registry, the device a run uses.
- :mod:`.rank` — what runs inside a rank process: entry points, rank server, probes. The launchers
  start it by module path; nothing else imports it.

Only :mod:`.rank` imports torch, so the CLI and the static linter stay importable without it.
"""
