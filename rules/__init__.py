"""The rules: one module per rule, discovered by :func:`fsdp2_lint.rule.all_rules`.

Installed as ``fsdp2_lint.rules``; adding a rule means adding one module here plus its fixtures.
"""
