"""Hostile but (mostly) valid Python sources, each parameterised by size, for the reliability tests.

Every form is valid Python that CPython compiles at moderate sizes, and each one stresses
something else in the linter: libcst's native parser recurses once per nesting level (and
overflows its stack), the syntax tree grows about 1 GB per MB of source, and the interpreter
recurses per level too. Each source mentions ``fully_shard`` so that the prefilter lets it through
to the parser. ``FORMS`` maps a name to its generator; ``source(name, size)`` gives the bytes.
"""

from __future__ import annotations

from collections.abc import Callable

HEADER = "from torch.distributed.fsdp import fully_shard\n"


def and_chain(terms: int) -> str:
    """``a and a and ...`` over short lines inside one pair of brackets (CPython keeps it flat)."""
    return HEADER + "x = (\n" + "    a and\n" * terms + "    b\n)\n"


def or_chain(terms: int) -> str:
    return HEADER + "x = (\n" + "    a or\n" * terms + "    b\n)\n"


def minus_chain(terms: int) -> str:
    """Unary minus, one per line, continued with backslashes."""
    return HEADER + "x = \\\n" + "    - \\\n" * terms + "    1\n"


def not_chain(terms: int) -> str:
    return HEADER + "x = (\n" + "    not\n" * terms + "    a\n)\n"


def power_chain(terms: int) -> str:
    """``2 ** 2 ** ...``: right-associative, so the tree nests to the right."""
    return HEADER + "x = (\n" + "    2 **\n" * terms + "    1\n)\n"


def plus_chain(terms: int) -> str:
    return HEADER + "x = (\n" + "    a +\n" * terms + "    b\n)\n"


def attribute_chain(terms: int) -> str:
    """``a.b.b.b...``, one attribute per line."""
    return HEADER + "x = (\n    a\n" + "    .b\n" * terms + ")\n"


def call_chain(terms: int) -> str:
    """``f()()()...``: each call wraps the previous one."""
    return HEADER + "x = (\n    f\n" + "    ()\n" * terms + ")\n"


def lambda_chain(terms: int) -> str:
    return HEADER + "x = (\n" + "    lambda:\n" * terms + "    1\n)\n"


def conditional_chain(terms: int) -> str:
    """``a if c else a if c else ...`` continued with backslashes."""
    return HEADER + "x = \\\n" + "    a if c else \\\n" * terms + "    b\n"


def brackets(depth: int) -> str:
    """Brackets nested ``depth`` deep (CPython refuses more than 200)."""
    return HEADER + "x = " + "(" * depth + "1" + ")" * depth + "\n"


def adjacent_strings(terms: int) -> str:
    """Implicitly concatenated string literals, one per line."""
    return HEADER + "x = (\n" + "    'a'\n" * terms + ")\n"


def fstring_chain(terms: int) -> str:
    """An `and` chain inside a triple-quoted f-string's replacement field: code in a string."""
    return HEADER + 'x = f"""{(\n' + "    a and\n" * terms + '    b)}"""\n'


def big_file(kilobytes: int) -> str:
    """Ordinary statements, about ``kilobytes`` KB of them."""
    line = "value = compute(alpha, beta) + 1\n"
    return HEADER + line * (kilobytes * 1024 // len(line))


FORMS: dict[str, Callable[[int], str]] = {
    "and": and_chain,
    "or": or_chain,
    "minus": minus_chain,
    "not": not_chain,
    "power": power_chain,
    "plus": plus_chain,
    "attribute": attribute_chain,
    "call": call_chain,
    "lambda": lambda_chain,
    "conditional": conditional_chain,
    "brackets": brackets,
    "strings": adjacent_strings,
    "fstring": fstring_chain,
    "big": big_file,
}
CHAINS = tuple(name for name in FORMS if name not in ("brackets", "big"))


def source(name: str, size: int) -> bytes:
    return FORMS[name](size).encode()
