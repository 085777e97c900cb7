"""Runtime confirmation harness: run training scripts under torchrun with probes and judge the run.

Nothing in this package imports torch at import time except the modules that only ever run inside
a rank process (:mod:`.probes`, :mod:`.rank`, :mod:`.rank_main`, :mod:`.rank_server`), so the CLI
and the static linter stay importable without torch.

Flow: a launcher (:mod:`.pool` — rank servers that import torch once and fork a child per fixture —
or :mod:`.torchrun_launcher` — one torchrun per script) runs each script with probes installed
(:mod:`.probes`); every rank writes structured events to a run directory (:mod:`.events`);
:mod:`.record` collects them, :mod:`.evidence` turns them into evidence, :mod:`.verdict` judges
fixtures against their rule's declared runtime signature and :mod:`.report` prints the result.
:mod:`.processes` keeps every process the harness starts from importing the current directory's
modules, and from outliving its run (keepers: :mod:`.keeper`, and one per pooled rank).
"""
