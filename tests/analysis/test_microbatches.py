"""Which functions pack this rank's data under a token budget, and which counts are divided out of a
token total (FSDP012's micro-batch counts)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis.microbatches import converted, divides_tokens, packed_lists, range_count, split_sections

GREEDY = """
def pack(seqs, max_tokens):
    packs, current, tokens = [], [], 0
    for seq in seqs:
        n = len(seq)
        if current and {test}:
            packs.append(current)
            current, tokens = [], 0
        current.append(seq)
        tokens += {size}
    return packs
"""


def function(source: str) -> cst.FunctionDef:
    return cst.parse_module(textwrap.dedent(source)).body[0]


@pytest.mark.parametrize(
    ("test", "size", "packed"),
    [
        ("tokens + len(seq) > max_tokens", "len(seq)", {"packs", "current"}),
        ("tokens + seq.numel() >= max_tokens", "seq.numel()", {"packs", "current"}),
        ("max_tokens < tokens + n", "n", {"packs", "current"}),  # `n` is bound to a size
        ("tokens + lengths[i] > max_tokens", "lengths[i]", {"packs", "current"}),
        ("len(current) + 1 > max_tokens", "1", set()),  # a count of samples, not of tokens
        ("len(current) >= max_tokens", "1", set()),
        ("tokens > max_tokens", "len(seq)", set()),  # no sum tested: not recognised (Known problems)
        ("tokens + step > max_tokens", "len(seq)", set()),  # `step` is bound nowhere: no size
    ],
)
def test_greedy_packing_is_a_sum_of_sizes_tested_against_a_limit(test, size, packed):
    assert packed_lists(function(GREEDY.format(test=test, size=size))) == packed


def test_first_fit_appends_in_the_loops_else():
    source = """
    def count(lengths, budget):
        bins = []
        for n in lengths:
            for i in range(len(bins)):
                if bins[i] + n <= budget:
                    bins[i] += n
                    break
            else:
                bins.append(n)
        return len(bins)
    """
    assert packed_lists(function(source)) == {"bins"}


def test_a_generator_packs_by_yielding():
    source = """
    def split(samples, budget):
        bucket, tokens = [], 0
        for s in samples:
            if tokens + len(s) > budget:
                yield bucket
                bucket, tokens = [], 0
            bucket.append(s)
            tokens += len(s)
    """
    assert "yield" in packed_lists(function(source))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("math.ceil(mask.sum().item() / budget)", True),
        ("-(-sum(lengths) // budget)", True),
        ("(ids.numel() + budget - 1) // budget", True),
        ("int(total / budget)", True),
        ("math.ceil(len(batch) / mb_size)", False),  # samples, not tokens
        ("batch.shape[0] // mb_size", False),
        ("grad_accum_steps", False),
        ("4", False),
    ],
)
def test_a_count_divided_out_of_a_token_total(expression, expected):
    module = cst.parse_module(f"total = attention_mask.sum()\nn = {expression}\n")
    assert divides_tokens(cst.parse_expression("n"), module) is expected


@pytest.mark.parametrize(
    ("expression", "count"),
    [("range(n)", "n"), ("range(0, n)", "n"), ("range(1, n)", None), ("batch.chunk(n)", None)],
)
def test_range_count(expression, count):
    found = range_count(cst.parse_expression(expression))
    assert (None if found is None else cst.Module([]).code_for_node(found)) == count


@pytest.mark.parametrize(
    ("expression", "number"),
    [("int(n)", "n"), ("torch.tensor(n, device=dev)", "n"), ("n.item()", "n"), ("n.tolist()", None), ("n", None)],
)
def test_conversions_hold_their_number(expression, number):
    found = converted(cst.parse_expression(expression))
    assert (None if found is None else cst.Module([]).code_for_node(found)) == number


@pytest.mark.parametrize(
    ("source", "packed"),
    [("seq_lens", {"sizes"}), ("batch['token_counts'].tolist()", {"sizes"}), ("samples", set())],
)
def test_a_loop_over_lengths_binds_a_size(source, packed):
    code = f"""
    def sizes_under(budget):
        sizes, tokens = [], 0
        for n in {source}:
            if tokens + n > budget:
                sizes.append(tokens)
                tokens = 0
            tokens += n
        return sizes
    """
    assert packed_lists(function(code)) == packed


@pytest.mark.parametrize(
    ("expression", "sections"),
    [
        ("torch.split(x, sizes)", "sizes"),
        ("x.split(sizes)", "sizes"),
        ("torch.tensor_split(x, indices_or_sections=cuts)", "cuts"),
        ("torch.split(x)", None),
        ("x.chunk(4)", None),
    ],
)
def test_split_sections(expression, sections):
    found = split_sections(cst.parse_expression(expression))
    assert (None if found is None else cst.Module([]).code_for_node(found)) == sections
