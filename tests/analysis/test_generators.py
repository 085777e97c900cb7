"""Generators used as context managers: a ``with`` entering a ``@contextmanager`` function runs its
code before the ``yield`` at the entry, the body, then the code after the ``yield`` at the exit.
Shapes that are not cut run the whole generator at the entry, and never lose the body. An object
whose class defines ``__enter__``/``__exit__`` is entered and exited the same way."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis.facts import interpret
from fsdp2_lint.analysis.interpreter.generators import split_at_yield
from fsdp2_lint.analysis.model import UNKNOWN, Event, EventKind
from fsdp2_lint.analysis.syntax import statements

HEADER = """\
import contextlib
from contextlib import contextmanager
"""

STEPS = {"enter", "body", "leave", "cleanup", "failed", "done"}


def entry_events(source: str, entry: str = "main") -> list[Event]:
    source = HEADER + textwrap.dedent(source)
    (trace,) = [trace for trace in interpret(cst.parse_module(source), source.encode()).traces if trace.entry == entry]
    return trace.events


def steps(source: str) -> list[str]:
    """The ``log.<step>()`` calls of ``main``, in execution order."""
    return [e.name for e in entry_events(source) if e.kind is EventKind.METHOD and e.name in STEPS]


# The plainest context manager written as a generator, for the tests that vary where it is entered.
MANAGED = """
        @contextmanager
        def managed(log):
            log.enter()
            yield
            log.leave()
        """


def with_main(generator: str, decorator: str = "@contextmanager") -> str:
    return f"""
        {decorator}
        def managed(log, flag):
{textwrap.indent(textwrap.dedent(generator), " " * 12)}
        def main(log, flag):
            with managed(log, flag):
                log.body()
        """


SPLIT_SHAPES = {
    "statement": (
        """
        log.enter()
        yield
        log.leave()
        """,
        ["enter", "body", "leave"],
    ),
    "try-finally": (
        """
        log.enter()
        try:
            yield log
            log.leave()
        finally:
            log.cleanup()
        """,
        ["enter", "body", "leave", "cleanup"],
    ),
    "try-except-else": (
        """
        try:
            log.enter()
            yield
        except ValueError:
            log.failed()
        else:
            log.done()
        log.leave()
        """,
        ["enter", "body", "failed", "done", "leave"],
    ),
    "if-else": (
        """
        if flag:
            log.enter()
            yield
            log.leave()
        else:
            yield
            log.cleanup()
        """,
        ["enter", "body", "leave", "cleanup"],
    ),
    "one-line-arms": (
        """
        log.enter()
        if flag: yield
        else: yield
        log.leave()
        """,
        ["enter", "body", "leave"],
    ),
    "elif-and-an-arm-without-yield": (
        """
        if flag == 1:
            log.enter()
            yield
        elif flag == 2:
            log.failed()
            raise ValueError
        else:
            yield
            log.leave()
        """,
        ["enter", "failed", "body", "leave"],
    ),
}


@pytest.mark.parametrize("shape", SPLIT_SHAPES)
def test_the_code_after_the_yield_runs_after_the_with_body(shape):
    generator, expected = SPLIT_SHAPES[shape]
    assert split_at_yield(statements(cst.parse_module(textwrap.dedent(generator)))) is not None
    assert steps(with_main(generator)) == expected


@pytest.mark.parametrize("decorator", ["@contextmanager", "@contextlib.contextmanager"])
def test_each_spelling_of_the_decorator(decorator):
    assert steps(with_main(SPLIT_SHAPES["statement"][0], decorator)) == ["enter", "body", "leave"]


def test_an_undecorated_generator_is_a_plain_call():
    assert steps(with_main(SPLIT_SHAPES["statement"][0], "")) == ["enter", "leave", "body"]


UNCUT_SHAPES = {
    "yield-in-a-loop": """
        for _ in range(2):
            log.enter()
            yield
        log.leave()
        """,
    "two-yields": """
        log.enter()
        yield
        yield
        log.leave()
        """,
    "yield-in-a-nested-with": """
        with open("f"):
            log.enter()
            yield
        log.leave()
        """,
}


@pytest.mark.parametrize("shape", UNCUT_SHAPES)
def test_a_shape_that_is_not_cut_runs_whole_at_the_entry(shape):
    generator = UNCUT_SHAPES[shape]
    assert split_at_yield(statements(cst.parse_module(textwrap.dedent(generator)))) is None
    assert steps(with_main(generator)) == ["enter", "leave", "body"]


def test_the_as_target_is_what_the_generator_yields():
    events = entry_events(
        """
        @contextmanager
        def managed(log):
            yield log.enter()

        def main(log):
            with managed(log) as entered:
                entered.body()
        """
    )
    (enter,) = [e for e in events if e.name == "enter"]
    (body,) = [e for e in events if e.name == "body"]
    assert body.receiver is not UNKNOWN and body.receiver is enter.result


def test_a_conditional_item_and_several_items_exit_in_reverse_order():
    source = """
        @contextmanager
        def outer(log):
            log.enter()
            yield
            log.leave()

        @contextmanager
        def inner(log):
            log.failed()
            yield
            log.done()

        def main(log, flag):
            with outer(log) if flag else contextlib.nullcontext(), inner(log):
                log.body()
        """
    assert steps(source) == ["enter", "failed", "body", "done", "leave"]


def test_a_return_in_the_body_still_exits():
    source = """
        @contextmanager
        def managed(log):
            try:
                yield
            finally:
                log.cleanup()

        def main(log):
            with managed(log):
                log.body()
                return 1
        """
    assert steps(source) == ["body", "cleanup"]


def test_an_async_context_manager():
    source = """
        @contextlib.asynccontextmanager
        async def managed(log):
            log.enter()
            yield
            log.leave()

        async def main(log):
            async with managed(log):
                log.body()
        """
    assert steps(source) == ["enter", "body", "leave"]


def test_a_split_call_is_neither_summarised_nor_replayed():
    """A plain call of the generator first (whole, summarised) and two ``with``s after it: each
    ``with`` expands the generator afresh and cuts it at the ``yield``."""
    source = (
        MANAGED
        + """

        def main(log):
            managed(log)
            with managed(log):
                log.body()
            with managed(log):
                log.body()
        """
    )
    assert steps(source) == ["enter", "leave"] + ["enter", "body", "leave"] * 2


def test_a_with_inside_a_summarised_helper_keeps_its_order_on_replay():
    source = (
        MANAGED
        + """

        def helper(log):
            with managed(log):
                log.body()

        def main(log):
            helper(log)
            helper(log)
        """
    )
    assert steps(source) == ["enter", "body", "leave"] * 2


# --- objects whose class defines `__enter__` and `__exit__` ------------------------------------------

MANAGER_CLASS = """
        class Managed:
            def __init__(self, log):
                self.log = log

            def __enter__(self):
                self.log.enter()
                return self.log

            def __exit__(self, exc_type, exc, tb):
                self.log.leave()
        """


def test_an_object_runs_its_enter_at_the_entry_and_its_exit_at_the_exit():
    events = entry_events(
        MANAGER_CLASS
        + """
        def main(log):
            managed = Managed(log)
            with managed as entered:
                entered.body()
        """
    )
    assert [e.name for e in events if e.kind is EventKind.METHOD and e.name in STEPS] == ["enter", "body", "leave"]
    (enter,) = [e for e in events if e.name == "enter"]
    (body,) = [e for e in events if e.name == "body"]
    assert body.receiver is not UNKNOWN and body.receiver == enter.receiver  # `as` binds what __enter__ returns


def test_objects_and_generators_exit_in_reverse_order():
    source = (
        MANAGER_CLASS
        + """
        @contextmanager
        def inner(log):
            log.failed()
            yield
            log.done()

        def main(log):
            with Managed(log), inner(log):
                log.body()
        """
    )
    assert steps(source) == ["enter", "failed", "body", "done", "leave"]


def test_an_async_with_runs_aenter_and_aexit():
    source = """
        class Managed:
            def __init__(self, log):
                self.log = log

            async def __aenter__(self):
                self.log.enter()

            async def __aexit__(self, *exc):
                self.log.leave()

        async def main(log):
            async with Managed(log):
                log.body()
        """
    assert steps(source) == ["enter", "body", "leave"]


def test_what_a_generator_yields_is_not_entered_again():
    source = (
        MANAGER_CLASS
        + """
        @contextmanager
        def opened(log):
            yield Managed(log)

        def main(log):
            with opened(log) as managed:
                log.body()
        """
    )
    assert steps(source) == ["body"]


def test_an_enter_nothing_calls_runs_with_its_exit_after_it():
    """A class used as a context manager by another file: its entry and exit on one path."""
    events = entry_events(MANAGER_CLASS, entry="Managed.__enter__")
    assert [e.name for e in events if e.kind is EventKind.METHOD and e.name in STEPS] == ["enter", "leave"]


# --- torch.set_default_device is process state: it outlives the call that set it -----------------

META_MANAGERS = {
    "generator": """
        @contextmanager
        def init_device(device):
            torch.set_default_device(device)
            yield
            torch.set_default_device("cpu")
        """,
    "generator restoring what it read": """
        @contextmanager
        def init_device(device):
            previous = torch.get_default_device()
            torch.set_default_device(device)
            try:
                yield
            finally:
                torch.set_default_device(previous)
        """,
    "class": """
        class init_device:
            def __init__(self, device):
                self.device = device
            def __enter__(self):
                torch.set_default_device(self.device)
            def __exit__(self, *exc):
                torch.set_default_device("cpu")
        """,
}


@pytest.mark.parametrize("manager", sorted(META_MANAGERS))
@pytest.mark.parametrize("device", ['"meta"', 'torch.device("meta")', '"cuda"'])
def test_a_context_manager_that_sets_the_default_device_puts_its_body_on_it(manager, device):
    source = (
        "\n        import torch"
        + META_MANAGERS[manager]
        + f"""
        def main():
            with init_device({device}):
                inside = Net()
            after = Net()
        """
    )
    built = [e.ctx.meta_device for e in entry_events(source) if e.kind is EventKind.INVOKE]  # Net()
    assert built == ["meta" in device, False]


def test_a_helper_that_sets_the_default_device_sets_it_for_its_caller():
    source = """
        import torch
        def use_meta():
            torch.set_default_device("meta")
        def main():
            before = Net()
            use_meta()
            on_meta = Net()
            use_meta()
            again = Net()
        """
    built = [e.ctx.meta_device for e in entry_events(source) if e.kind is EventKind.INVOKE]  # Net()
    assert built == [False, True, True]


def test_the_default_device_set_in_one_arm_holds_in_that_arm_and_may_hold_after_it():
    source = """
        import torch
        def main(flag):
            if flag:
                torch.set_default_device("meta")
                in_arm = Net()
            else:
                other_arm = Net()
            after = Net()
        """
    built = [e.ctx.meta_device for e in entry_events(source) if e.kind is EventKind.INVOKE]  # Net()
    assert built == [True, False, True]
