"""The parent side of ``fsdp2-lint confirm`` (torch-free): choose, launch, judge, report.

:mod:`.command` is the click command; :mod:`.fixtures` finds the fixtures of the selected rules;
:mod:`.confirm_fixtures` runs them and :mod:`.verdict` judges each run against its rule's runtime
signature; :mod:`.confirm_script` runs the user's script and sets its evidence next to the static
findings; :mod:`.report` prints both. Imports :mod:`fsdp2_lint.runtime.launch` and
:mod:`fsdp2_lint.runtime.evidence`, never :mod:`fsdp2_lint.runtime.rank`.
"""
