"""Starting runs and stopping them (torch-free): the launchers and the processes they own.

:mod:`.pool` (rank servers that import torch once and fork a child per run) and :mod:`.torchrun`
(one ``torchrun`` per run) start the rank entry points of :mod:`fsdp2_lint.runtime.rank` by module
path, never by import; :mod:`.stall` finds runs whose ranks stopped making progress;
:mod:`.processes` and :mod:`.keeper` keep every process from importing the current directory's
modules and from outliving its run. Imports :mod:`fsdp2_lint.runtime.evidence` only.
"""
