"""The abstract interpreter: :mod:`.core` evaluates Python, :mod:`.flow` runs branches,
:mod:`.guards` says what a test establishes in each arm (with :mod:`.ranks` for rank tests),
:mod:`.torch_api` says what torch calls do,
and :mod:`.state` holds environments, frames, the heap and outcomes."""
