"""The contract between the ranks and the harness (torch-free): what ranks write and the harness reads.

:mod:`.events` names the event kinds and writes each rank's JSON-lines event log; :mod:`.record`
holds what a run was asked to do (``RunSpec``) and collects what it left (``RunRecord``);
:mod:`.registry` turns a record into evidence, one registered kind at a time; :mod:`.device` is
the device and backend a run uses; :mod:`.signals` is the signal that makes a rank dump its stacks.
Imports nothing of ``fsdp2_lint.runtime`` outside this package.
"""
