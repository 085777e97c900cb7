"""What a rule is: one class in one module of ``fsdp2_lint.rules`` (the repository's ``rules/``).

A rule declares its identity and documentation next to its check (Fixit/Ruff style), the fix it
can offer and how safe that is (:class:`FixOffer`), the byte tokens a file must contain for the
rule to possibly fire (the prefilter), and the runtime signature the confirmation harness must
observe when a bad fixture of the rule is run, and the torch versions in which its failure happens.
The check reads the facts computed once per file (:class:`fsdp2_lint.analysis.facts.FileFacts`) and
yields findings; it never re-walks the syntax tree. A rule's severity is a
:class:`fsdp2_lint.diagnostics.Severity`; libcst is named here only in type annotations.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from fsdp2_lint.diagnostics import Applicability, Severity
from fsdp2_lint.prefilter import Tokens, Word
from fsdp2_lint.torch_version import TorchVersions

if TYPE_CHECKING:
    import libcst as cst

    from fsdp2_lint.analysis.facts import FileFacts
    from fsdp2_lint.fixing.rewrite import Rewrite

CODE_PATTERN = re.compile(r"^FSDP\d{3}$")


@dataclass(frozen=True)
class RuntimeSignature:
    """How the failure of a bad fixture shows up when the script is run under torchrun.

    ``evidence`` names the kind of observation the harness must make (an exception, a hang,
    parameters that an optimizer step leaves unchanged, a ``torch.save`` of DTensors, ...);
    for exceptions, ``exception`` lists the accepted exception type names and ``message`` is a
    regular expression the exception text must match. ``min_gpus`` > 0 marks failures that can
    only be reproduced on that many GPUs (the harness reports them as not runnable elsewhere).
    ``min_ranks`` > 1 marks failures that need that many ranks to show in every form (ranks that
    disagree, a shard smaller than the whole): a run with fewer ranks that shows no matching
    failure could not have shown it, and is reported as not runnable there, not as unconfirmed.
    ``torch_versions`` narrows where this evidence shows when the rule's misuse fails differently
    elsewhere (an error on new torch, a silent break on older): there the rule still runs, and
    ``confirm`` reports its fixtures as not reproducible on that torch.
    """

    evidence: str
    exception: tuple[str, ...] = ()
    message: str | None = None
    min_gpus: int = 0
    min_ranks: int = 1
    note: str = ""
    torch_versions: TorchVersions = TorchVersions()


@dataclass(frozen=True)
class FixOffer:
    """The fix a rule can attach to its findings: what it does (``summary``: README's fix table),
    the ``applicabilities`` its fixes can have, and why they are safe, or what makes one unsafe
    (``safety``: the "Fix safety" section of the rule's documentation)."""

    summary: str
    applicabilities: tuple[Applicability, ...]
    safety: str


@dataclass(frozen=True)
class Finding:
    """A violation found by a rule: the node to report and, optionally, what differs from the
    rule's defaults (a rule with two cases may report one as a warning) and a fix."""

    node: cst.CSTNode
    message: str | None = None
    hint: str | None = None
    severity: Severity | None = None
    fix: Rewrite | None = None
    # Other places that make it a misuse, each with what happens there ("`model` is sharded here").
    related: tuple[tuple[cst.CSTNode, str], ...] = ()


class Rule:
    """Base class of every rule. Subclasses set the class attributes and implement :meth:`check`."""

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, e.g. "optimizer-before-shard"
    summary: ClassVar[str]  # one line: the default diagnostic message
    hint: ClassVar[str]  # one line: how to fix it
    failure: ClassVar[str]  # one line: what happens at runtime (README's rule table)
    severity: ClassVar[Severity] = Severity.ERROR
    docs: ClassVar[str]  # markdown: what it flags, why it breaks (the observed failure)
    # The fix its findings can carry; None: it never offers one. Tests check the rule keeps to it.
    fix_offer: ClassVar[FixOffer | None] = None
    # Fixit-style examples: they are run as tests and printed by `fsdp2-lint rule CODE`.
    # Each invalid example marks its expected diagnostics with `# expect: CODE` on the line.
    valid: ClassVar[tuple[str, ...]] = ()
    invalid: ClassVar[tuple[str, ...]] = ()
    # Prefilter: every inner tuple is a set of alternatives of which one must occur in the file's
    # code (comments aside) for the rule to be able to fire (conjunctive normal form): substrings,
    # or `prefilter.Word`s (whole identifiers). Must be exact: a file that lacks them can produce
    # no diagnostic from this rule (tests/analysis/test_prefilter.py compares runs with and without it).
    requires: ClassVar[tuple[tuple[str | Word, ...], ...]] = (("fully_shard",),)
    signature: ClassVar[RuntimeSignature]
    # The torch versions in which the failure happens; outside them the rule does not run (the
    # version linted for: `torch-version` in the configuration, else the installed torch).
    torch_versions: ClassVar[TorchVersions] = TorchVersions()

    @classmethod
    def reproducible_on(cls) -> TorchVersions:
        """Where ``confirm`` can show the failure: the signature's range where it narrows the rule's."""
        return cls.torch_versions if cls.signature.torch_versions.unbounded else cls.signature.torch_versions

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        raise NotImplementedError

    @classmethod
    def applies_to(cls, data: bytes) -> bool:
        """Can the rule fire on a file with these bytes (the first stage of the prefilter)?"""
        return Tokens(data).satisfies(cls)

    @classmethod
    def url(cls) -> str:
        return f"https://github.com/fsdp2-lint/fsdp2-lint/blob/main/rules/{cls.__module__.rsplit('.', 1)[-1]}.py"


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule shipped in ``fsdp2_lint.rules``, ordered by code; one rule class per module."""
    import fsdp2_lint.rules as package

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        classes = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise RuntimeError(f"{module.__name__} must define exactly one Rule, found {len(classes)}")
        rule = classes[0]
        if not CODE_PATTERN.match(rule.code):
            raise RuntimeError(f"{module.__name__}: bad rule code {rule.code!r}")
        found.append(rule)
    codes = [rule.code for rule in found]
    duplicates = {code for code in codes if codes.count(code) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda rule: rule.code))
