"""Fixing, a library beneath the engine: what a rule proposes (:mod:`~fsdp2_lint.fixing.rewrite`,
built with :mod:`~fsdp2_lint.fixing.builders`), applying it to a module
(:mod:`~fsdp2_lint.fixing.apply`), the text edits it amounts to
(:mod:`~fsdp2_lint.fixing.text_edits`, :mod:`~fsdp2_lint.fixing.lines`: line edits, what libcst's
round trip drops, diffs) and writing a fixed file in place (:mod:`~fsdp2_lint.fixing.atomic_write`)."""
