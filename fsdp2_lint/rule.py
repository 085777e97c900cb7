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
import re
import types
from collections.abc import Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from fsdp2_lint.diagnostics import Applicability, Severity
from fsdp2_lint.prefilter import Token, Tokens, Word
from fsdp2_lint.torch_version import TorchVersions

if TYPE_CHECKING:
    import libcst as cst

    from fsdp2_lint.analysis.facts import FileFacts
    from fsdp2_lint.fixing.rewrite import Rewrite

CODE_PATTERN = r"^FSDP\d{3}$"  # checked when the rules are imported (`re` compiles it then)
# The records a rule module builds are NamedTuples, not dataclasses: every run imports this module,
# and compiling a dataclass's methods would cost every start, the rules imported or not.


class RuntimeSignature(NamedTuple):
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


class FixOffer(NamedTuple):
    """The fix a rule can attach to its findings: what it does (``summary``: README's fix table),
    the ``applicabilities`` its fixes can have, and why they are safe, or what makes one unsafe
    (``safety``: the "Fix safety" section of the rule's documentation)."""

    summary: str
    applicabilities: tuple[Applicability, ...]
    safety: str


class Finding(NamedTuple):
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
        """The rule's documentation page (SARIF's ``helpUri``, the LSP's ``codeDescription``)."""
        return f"{RULE_PAGES_URL}/{cls.code}.md"


# Each rule's documentation page, RULE_PAGES/<CODE>.md in the repository: rule_docs.rule_markdown's
# text, written by tests/support/rule_pages.py and kept current by tests/project/test_rule_pages.py.
RULE_PAGES = "docs/rules"
RULE_PAGES_URL = f"https://github.com/fsdp2-lint/fsdp2-lint/blob/main/{RULE_PAGES}"


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule shipped in ``fsdp2_lint.rules``, ordered by code; one rule class per module."""
    import pkgutil

    import fsdp2_lint.rules as package

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):  # the rule index
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        classes = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise RuntimeError(f"{module.__name__} must define exactly one Rule, found {len(classes)}")
        rule = classes[0]
        if not re.match(CODE_PATTERN, rule.code):
            raise RuntimeError(f"{module.__name__}: bad rule code {rule.code!r}")
        found.append(rule)
    codes = [rule.code for rule in found]
    duplicates = {code for code in codes if codes.count(code) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda rule: rule.code))


class RuleHead(NamedTuple):  # not a dataclass: compiling its methods would cost every start
    """What a run needs of a rule before it parses anything (the selection, the torch version
    linted for, the prefilter), without importing the rule's module, which imports the analysis
    and libcst: a run whose files the prefilter rejects imports neither. :meth:`load` gives the
    rule class. ``fsdp2_lint.rules._index`` lists the rules' heads; ``tests/rules/test_rule_index.py``
    checks it against the rules (``python tests/support/rule_index.py --update`` rewrites it)."""

    code: str
    name: str
    severity: Severity
    requires: tuple[tuple[Token, ...], ...]
    torch_versions: TorchVersions
    module: str  # in fsdp2_lint.rules
    class_name: str

    def load(self) -> type[Rule]:
        rule = getattr(importlib.import_module(f"fsdp2_lint.rules.{self.module}"), self.class_name)
        assert rule.code == self.code, f"the rule index is stale: {self.module}.{self.class_name} is {rule.code}"
        return rule


def rule_heads() -> tuple[RuleHead, ...]:
    """Every rule's head, ordered by code, as ``all_rules()`` orders the rules."""
    from fsdp2_lint.rules import _index

    return _index.HEADS


# A rule as a run carries it: its head (from the configuration) or its class (tests, the harness).
RuleLike = RuleHead | type[Rule]


def loaded(rule: RuleLike) -> type[Rule]:
    """The rule class of a head, or the class itself."""
    return rule.load() if isinstance(rule, RuleHead) else rule


def head_of(rule: type[Rule]) -> RuleHead:
    """The head of a rule class, as the index records it."""
    return RuleHead(
        rule.code,
        rule.name,
        rule.severity,
        rule.requires,
        TorchVersions(rule.torch_versions.since, rule.torch_versions.before),
        rule.__module__.rpartition(".")[2],
        rule.__qualname__,
    )


def index_source(rules: Sequence[type[Rule]]) -> str:
    """The text of ``fsdp2_lint.rules._index`` for these rules."""
    imports: set[str] = set()
    entries = [_head_source(head_of(rule), imports) for rule in rules]
    lines = [
        '"""Every rule\'s head (see ``fsdp2_lint.rule.RuleHead``): generated from the rules by',
        '``python tests/support/rule_index.py --update``; do not edit."""',
        "",
        *sorted(imports),
        "from fsdp2_lint.diagnostics import Severity",
        "from fsdp2_lint.prefilter import Word",
        "from fsdp2_lint.rule import RuleHead",
        "from fsdp2_lint.torch_version import TorchVersions",
        "",
        "HEADS = (",
        *entries,
        ")",
    ]
    return "\n".join(lines) + "\n"


def _head_source(head: RuleHead, imports: set[str]) -> str:
    requires = "".join(
        f"({''.join(f'{_token_source(token, head, imports)}, ' for token in group)}), " for group in head.requires
    )
    versions = head.torch_versions
    bounds = ", ".join(repr(None if bound is None else str(bound)) for bound in (versions.since, versions.before))
    return (
        f"    RuleHead({head.code!r}, {head.name!r}, Severity.{head.severity.name}, ({requires}), "
        f"TorchVersions({bounds}), {head.module!r}, {head.class_name!r}),"
    )


def _token_source(token: Token, head: RuleHead, imports: set[str]) -> str:
    if isinstance(token, str):
        return repr(token)
    accepts = token.accepts
    tail = "" if token.in_strings else ", in_strings=False"
    if isinstance(accepts, frozenset):
        return f"Word({token.core!r}, frozenset({sorted(accepts)!r}){tail})"
    module = getattr(accepts, "__module__", "") or ""
    if (
        not isinstance(accepts, types.FunctionType)
        or "<" in accepts.__qualname__
        or "." in accepts.__qualname__
        or module.startswith("fsdp2_lint.rules")
    ):
        raise ValueError(
            f"{head.code}: a Word accepts a set of words or a function of a module other than the rule's "
            f"(the index names it without importing the rule), not {accepts!r}"
        )
    alias = "_" + module.replace(".", "_")
    imports.add(f"import {module} as {alias}")
    return f"Word({token.core!r}, {alias}.{accepts.__qualname__}{tail})"
