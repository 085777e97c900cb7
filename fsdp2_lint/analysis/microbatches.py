"""Micro-batch counts that follow this rank's own token counts (FSDP012): a list packed greedily
under a token budget (``if tokens + len(seq) > max_tokens: batches.append(current)``), or a count
divided out of a token total (``range(math.ceil(mask.sum() / max_tokens))``). A fixed chunking
(``batch.chunk(4)``, ``range(grad_accum_steps)``, ``torch.split(x, mb_size)``) is neither. Syntax
only: which function a call runs is the interpreter's to say."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.syntax import dotted, is_zero, own_nodes

# Calls that pass a sequence's length through (`for i, mb in enumerate(batches)`).
_SAME_LENGTH = {"enumerate", "zip", "list", "tuple", "reversed", "sorted", "iter"}
# Methods and builtins whose result counts tokens (`mask.sum()`, `ids.numel()`, `sum(lengths)`).
_TOKEN_METHODS = {"sum", "numel", "nelement"}
_CONVERSIONS = {"int", "float", "torch.tensor", "torch.as_tensor"}


def iterated(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """What a ``for`` loop over ``node`` runs once per element of: ``node`` itself, and what an
    ``enumerate``/``zip``/``list`` call passes through (the first argument of ``zip``)."""
    yield node
    if isinstance(node, cst.Call) and dotted(node.func) in _SAME_LENGTH and node.args:
        yield from iterated(node.args[0].value)


def range_count(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The count of ``range(n)`` / ``range(0, n)``, or ``None`` for anything else."""
    if not (isinstance(node, cst.Call) and dotted(node.func) == "range" and 1 <= len(node.args) <= 2):
        return None
    if len(node.args) == 2 and not is_zero(node.args[0].value):
        return None
    return node.args[-1].value


def split_sections(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The sizes of ``torch.split(x, sizes)`` / ``x.split(sizes)`` (also ``tensor_split``): a list
    gives as many pieces as it has elements, so the count is its length."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    if node.func.attr.value not in ("split", "tensor_split"):
        return None
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value in ("split_size_or_sections", "indices_or_sections"):
            return arg.value
    positional = [arg.value for arg in node.args if arg.keyword is None]
    offset = 1 if dotted(node.func) in ("torch.split", "torch.tensor_split") else 0
    return positional[offset] if len(positional) > offset else None


def comprehended(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """What a list comprehension or generator runs once per element of: ``X`` of ``[f(g) for g in X]``."""
    if isinstance(node, (cst.ListComp, cst.GeneratorExp)) and node.for_in.inner_for_in is None:
        return node.for_in.iter
    return None


def bindings(function: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """The values ``name = value`` assigns anywhere in ``function`` (tuple targets included)."""
    found = []
    for node in own_nodes(function):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                found.extend(_bound(target.target, node.value, name))
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            found.extend(_bound(node.target, node.value, name))
    return found


def packed_lists(function: cst.CSTNode) -> set[str]:
    """The names of the lists ``function`` packs under a token budget: appended to in a loop that
    tests a sum of sizes against a limit (greedy: `if tokens + n > budget: packs.append(current)`;
    first fit: `if packs[i] + n <= budget: ...` with `else: packs.append(n)`). ``"yield"`` when it
    yields the packs instead."""
    packed: set[str] = set()
    for loop in own_nodes(function):
        if isinstance(loop, (cst.For, cst.While)) and any(
            isinstance(node, cst.If) and _budget_test(node.test, function) for node in own_nodes(loop.body)
        ):
            packed.update(_appended(loop))
    return packed


def divides_tokens(node: cst.BaseExpression, function: cst.CSTNode) -> bool:
    """Is ``node`` a count divided out of a token total, ``math.ceil(tokens / budget)``,
    ``-(-tokens // budget)``, ``(tokens + budget - 1) // budget`` (names followed through
    ``function``'s assignments)?"""
    node = _unwrapped(node)
    if isinstance(node, cst.Name):
        return any(divides_tokens(value, function) for value in bindings(function, node.value))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return divides_tokens(node.expression, function)
    if isinstance(node, cst.Call) and dotted(node.func) in ("math.ceil", "ceil", "int", "round") and node.args:
        return divides_tokens(node.args[0].value, function)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
        return counts_tokens(node.left, function)
    return False


def counts_tokens(node: cst.BaseExpression, function: cst.CSTNode, depth: int = 0) -> bool:
    """Does ``node`` count this rank's tokens: ``mask.sum()``, ``ids.numel()``, ``sum(lengths)``
    (also ``.item()`` / ``int()`` of one, a sum or difference with one, a name bound to one)?"""
    node = _unwrapped(node)
    if depth > 8:  # names bound to each other in a cycle
        return False
    if isinstance(node, cst.Name):
        return any(counts_tokens(value, function, depth + 1) for value in bindings(function, node.value))
    if isinstance(node, cst.UnaryOperation):
        return counts_tokens(node.expression, function, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        return counts_tokens(node.left, function, depth + 1) or counts_tokens(node.right, function, depth + 1)
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Name):
        if func.value == "sum" and node.args:
            return True
        converts = func.value in ("int", "float") and bool(node.args)
        return converts and counts_tokens(node.args[0].value, function, depth + 1)
    if isinstance(func, cst.Attribute):
        if func.attr.value in _TOKEN_METHODS:
            return True
        return func.attr.value in ("item", "tolist") and counts_tokens(func.value, function, depth + 1)
    return False


def converted(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The number a conversion holds: ``x`` of ``int(x)``, ``torch.tensor(x)``, ``x.item()``; else ``None``."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and not node.args:
        return node.func.value
    positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
    if dotted(node.func) in _CONVERSIONS and len(positional) == 1:  # `torch.tensor(n, device=...)`
        return positional[0].value
    return None


def _budget_test(test: cst.BaseExpression, function: cst.CSTNode) -> bool:
    """``tokens + n > limit`` (any order, ``<``/``<=``/``>``/``>=``, inside ``and``/``or``), where
    neither term of the sum is a constant and one of them is a size: a token budget, not a count of
    samples (``len(current) + 1 > mb_size``)."""
    if isinstance(test, cst.BooleanOperation):
        return _budget_test(test.left, function) or _budget_test(test.right, function)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    ordering = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)
    if not isinstance(test.comparisons[0].operator, ordering):
        return False
    return _sum_of_sizes(test.left, function) or _sum_of_sizes(test.comparisons[0].comparator, function)


def _sum_of_sizes(node: cst.BaseExpression, function: cst.CSTNode) -> bool:
    node = _unwrapped(node)
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
        return False
    terms = (_unwrapped(node.left), _unwrapped(node.right))
    return not any(isinstance(term, (cst.Integer, cst.Float)) for term in terms) and any(
        _size(term, function) for term in terms
    )


def _size(node: cst.BaseExpression, function: cst.CSTNode) -> bool:
    """A size, or a name bound to one: ``len(seq)``, ``seq.numel()``, ``x.size(-1)``, ``x.shape[0]``,
    ``lengths[i]``, ``mask.sum()``, ``n`` of ``for n in seq_lens`` (a loop over lengths by its name)."""
    if isinstance(node, cst.Name):
        if any(_names_lengths(iterable) for iterable in _loop_sources(function, node.value)):
            return True
        return any(_size(_unwrapped(value), function) for value in bindings(function, node.value))
    if isinstance(node, cst.Subscript):
        return True
    if isinstance(node, cst.Call):
        name = node.func.attr.value if isinstance(node.func, cst.Attribute) else dotted(node.func)
        return name in ("len", "size", *_TOKEN_METHODS) or counts_tokens(node, function)
    return False


def _loop_sources(function: cst.CSTNode, name: str) -> Iterator[cst.BaseExpression]:
    """What the ``for`` loops of ``function`` that bind ``name`` alone iterate over."""
    for node in own_nodes(function):
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == name:
            yield node.iter


def _names_lengths(node: cst.BaseExpression) -> bool:
    """``seq_lens``, ``total_lengths``, ``batch["token_counts"]``, ``x.tolist()`` of one: named for lengths."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    text = cst.Module([]).code_for_node(node).lower()
    return any(word in text for word in ("len", "token"))


def _appended(body: cst.CSTNode) -> Iterator[str]:
    for node in own_nodes(body):
        if isinstance(node, (cst.Yield,)):
            yield "yield"
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            yield dotted(node.func.value)


def _bound(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> list[cst.BaseExpression]:
    if isinstance(target, cst.Name):
        return [value] if target.value == name else []
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        if len(target.elements) == len(value.elements):
            pairs = zip(target.elements, value.elements, strict=True)
            return [found for t, v in pairs for found in _bound(t.value, v.value, name)]
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call):  # `packs, index = pack(...)`
        return [value] if any(_bound(element.value, value, name) for element in target.elements) else []
    return []


def _unwrapped(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` without the ``.item()`` / ``int(...)`` that turn a one-element tensor into a number."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "item":
        return _unwrapped(node.func.value)
    return node
