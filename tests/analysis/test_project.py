"""The analysis across a project's modules: finding the project, resolving its imports in every
spelling, following calls into its modules, and where the findings go."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from project_cases import MODEL, OPTIM, PARALLEL

from fsdp2_lint.analysis.interpreter import summaries
from fsdp2_lint.analysis.project import Project, Projects, find_root
from fsdp2_lint.cache import Cache
from fsdp2_lint.config import Selection
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files

# trainer/checkpoint.py: saves the model it is given
CHECKPOINT = """
    import torch


    def save(model, path):
        torch.save(model.state_dict(), path)
    """
TRAIN_WRONG_ORDER = """
    {imports}


    def main():
        model = Model()
        opt = build_optimizer(model)
        model = shard_model(model)
        opt.step()
    """


def write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip() if text.startswith("\n") else text)


def lint(*paths: Path, follow: bool = True, cache: Cache | None = None, max_file_size: int | None = None) -> list:
    resolver = SettingsResolver(Selection(), isolated=True, max_file_size=max_file_size, no_follow_imports=not follow)
    tasks = [LintTask.of(path, resolver.for_path(path), str(path)) for path in paths]
    return [d for found in lint_files(tasks, jobs=1, cache=cache) for d in found]


def train_text(imports: str) -> str:
    """train.py: the imports, then ``main`` (its first line is the import count + 4 further down)."""
    return textwrap.dedent(TRAIN_WRONG_ORDER).lstrip().format(imports=imports)


def codes_at(diagnostics: list) -> list[tuple[str, int, str]]:
    return sorted((Path(d.path).name, d.line, d.code) for d in diagnostics)


def optimizer_line(train: Path) -> int:
    """The line of ``opt = build_optimizer(model)``, where FSDP001 goes."""
    return next(n for n, line in enumerate(train.read_text().splitlines(), 1) if "build_optimizer(model)" in line)


def package(root: Path, imports: str, extra: dict[str, str] | None = None) -> Path:
    files = {
        "trainer/__init__.py": "",
        "trainer/model.py": MODEL,
        "trainer/parallel.py": PARALLEL,
        "trainer/optim.py": OPTIM,
        "trainer/train.py": train_text(imports),
        **(extra or {}),
    }
    write(root, files)
    return root / "trainer" / "train.py"


IMPORT_STYLES = {
    "absolute": (
        "from trainer.model import Model\nfrom trainer.optim import build_optimizer\n"
        "from trainer.parallel import shard_model",
        {},
    ),
    "relative": "from .model import Model\nfrom .optim import build_optimizer\nfrom .parallel import shard_model",
    "module alias": (
        "import trainer.optim as optim_lib\nfrom trainer.model import Model\nfrom trainer.parallel import shard_model\n"
        "build_optimizer = optim_lib.build_optimizer",
        {},
    ),
    "package re-export": (
        "from trainer import Model, build_optimizer, shard_model",
        {
            "trainer/__init__.py": "from .model import Model\nfrom .optim import build_optimizer\n"
            "from .parallel import shard_model\n\n__all__ = ['Model', 'build_optimizer', 'shard_model']\n"
        },
    ),
    "star import": (
        "from trainer.all import *",
        {"trainer/all.py": "from .model import *\nfrom .optim import *\nfrom .parallel import *\n"},
    ),
    "importlib.import_module": (
        "import importlib\nfrom trainer.model import Model\nfrom trainer.parallel import shard_model\n"
        "build_optimizer = importlib.import_module('trainer.optim').build_optimizer",
        {},
    ),
    "import_module relative to __package__": (
        "from importlib import import_module\nfrom trainer.model import Model\nfrom trainer.parallel import shard_model\n"
        "optim_lib = import_module('.optim', package=__package__)\nbuild_optimizer = optim_lib.build_optimizer",
        {},
    ),
    "import_module relative to a literal package": (
        "import importlib\nfrom trainer.model import Model\nfrom trainer.parallel import shard_model\n"
        "build_optimizer = importlib.import_module('.optim', 'trainer').build_optimizer",
        {},
    ),
    "import_module in __init__ relative to __name__": (
        "from trainer import Model, build_optimizer, shard_model",
        {
            "trainer/__init__.py": "from importlib import import_module\n\n"
            "Model = import_module('.model', __name__).Model\n"
            "build_optimizer = import_module('.optim', __name__).build_optimizer\n"
            "shard_model = import_module('.parallel', __name__).shard_model\n"
        },
    ),
    "try/except ImportError": (
        "try:\n    from trainer.parallel import shard_model\nexcept ImportError:\n    shard_model = None\n"
        "from trainer.model import Model\nfrom trainer.optim import build_optimizer",
        {},
    ),
}


@pytest.mark.parametrize("style", IMPORT_STYLES)
def test_a_misuse_split_across_modules_is_found_in_every_import_style(tmp_path: Path, style: str) -> None:
    imports, extra = IMPORT_STYLES[style] if isinstance(IMPORT_STYLES[style], tuple) else (IMPORT_STYLES[style], {})
    train = package(tmp_path, imports, extra)
    found = lint(train)
    line = optimizer_line(train)
    assert codes_at(found) == [("train.py", line, "FSDP001")]
    assert f"(line {line + 1})" in found[0].message
    assert [(Path(r.path).name, r.line) for r in found[0].related] == [("train.py", line + 1)]


def test_without_following_imports_the_file_is_analysed_alone(tmp_path: Path) -> None:
    train = package(tmp_path, IMPORT_STYLES["absolute"][0])
    assert lint(train, follow=False) == []


def test_import_module_with_a_computed_name_stays_unknown(tmp_path: Path) -> None:
    imports = (
        "import importlib\nfrom trainer.model import Model\nfrom trainer.parallel import shard_model\n"
        "OPTIM = 'trainer.optim'\nbuild_optimizer = importlib.import_module(OPTIM).build_optimizer"
    )
    assert lint(package(tmp_path, imports)) == []


def test_the_import_closure_reads_the_import_module_spellings_the_analysis_resolves(tmp_path: Path) -> None:
    imports, extra = IMPORT_STYLES["import_module in __init__ relative to __name__"]
    train = package(tmp_path, imports, extra)
    project = Projects().for_file(train)
    reached = {path.name for path, _ in project.imported_sources(train, train.read_bytes())}
    assert reached == {"__init__.py", "model.py", "optim.py", "parallel.py"}
    # the package argument places a relative name, not the importing file's folder
    write(
        tmp_path,
        {"tools/__init__.py": "", "tools/optim.py": "", "trainer/runner.py": "import_module('.optim', 'tools')\n"},
    )
    runner = tmp_path / "trainer/runner.py"
    reached = [path.relative_to(tmp_path) for path, _ in project.imported_sources(runner, runner.read_bytes())]
    assert reached == [Path("tools/__init__.py"), Path("tools/optim.py")]


def test_a_src_layout_resolves_from_src(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "src/trainer/__init__.py": "",
            "src/trainer/parallel.py": PARALLEL,
            "src/trainer/optim.py": OPTIM,
            "src/trainer/model.py": MODEL,
            "src/trainer/train.py": train_text(IMPORT_STYLES["absolute"][0]),
        },
    )
    train = tmp_path / "src/trainer/train.py"
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


def test_a_script_project_resolves_its_sibling_modules(tmp_path: Path) -> None:
    """`python examples/train.py` puts the script's folder first on the path: `import parallel` is its sibling."""
    imports = "from model import Model\nfrom optim import build_optimizer\nfrom parallel import shard_model"
    write(
        tmp_path,
        {
            "examples/model.py": MODEL,
            "examples/parallel.py": PARALLEL,
            "examples/optim.py": OPTIM,
            "examples/train.py": train_text(imports),
        },
    )
    train = tmp_path / "examples/train.py"
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


def test_a_re_exported_fully_shard_is_fully_shard(tmp_path: Path) -> None:
    parallel = PARALLEL.replace(
        "from torch.distributed.fsdp import fully_shard", "from trainer.fsdp import fully_shard"
    )
    train = package(
        tmp_path,
        IMPORT_STYLES["absolute"][0],
        {"trainer/parallel.py": parallel, "trainer/fsdp.py": "from torch.distributed.fsdp import fully_shard\n"},
    )
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


def test_a_rank_constant_from_a_config_module_is_its_value(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/config.py": "MAIN_PROCESS_RANK = 0\n",
            "app/run.py": """
                import torch.distributed as dist
                from app.config import MAIN_PROCESS_RANK


                def main():
                    if dist.get_rank() == MAIN_PROCESS_RANK:
                        dist.barrier()
                """,
        },
    )
    (found,) = lint(tmp_path / "app/run.py")
    assert found.code == "FSDP007" and "only on rank 0" in found.message


RANK_ZERO_FIRST = """
    import torch.distributed as dist
    from contextlib import contextmanager


    class RankZeroFirst:
        def __init__(self, local_rank):
            self.local_rank = local_rank

        def __enter__(self):
            if self.local_rank != 0:
                dist.barrier()

        def __exit__(self, *exc):
            if self.local_rank {exit_test} 0:
                dist.barrier()


    @contextmanager
    def torch_distributed_zero_first(local_rank):
        if local_rank not in (-1, 0):
            dist.barrier()
        yield
        if local_rank == 0:
            dist.barrier()
    """


@pytest.mark.parametrize("entered", ["RankZeroFirst(local_rank)", "torch_distributed_zero_first(local_rank)"])
def test_a_rank_zero_first_guard_from_another_module_pairs_its_barriers(tmp_path: Path, entered: str) -> None:
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/distributed.py": RANK_ZERO_FIRST.format(exit_test="=="),
            "app/data.py": f"""
                import os

                from app.distributed import RankZeroFirst, torch_distributed_zero_first


                def load(path):
                    local_rank = int(os.environ["LOCAL_RANK"])
                    with {entered}:
                        return download(path)
                """,
        },
    )
    assert lint(tmp_path / "app/data.py", tmp_path / "app/distributed.py") == []


def test_a_guard_from_another_module_that_waits_on_the_same_ranks_twice_is_reported(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/distributed.py": RANK_ZERO_FIRST.format(exit_test="!="),
            "app/data.py": """
                import os

                from app.distributed import RankZeroFirst


                def load(path):
                    with RankZeroFirst(int(os.environ["LOCAL_RANK"])):
                        return download(path)
                """,
        },
    )
    found = lint(tmp_path / "app/data.py")
    assert codes_at(found) == [("distributed.py", 11, "FSDP007"), ("distributed.py", 15, "FSDP007")]


def test_one_half_of_a_protocol_from_another_module_is_reported_at_its_caller_s_lint(tmp_path: Path) -> None:
    channel = """
        import torch.distributed as dist


        class PlanChannel:
            def __init__(self):
                self.rank = dist.get_rank()

            def publish(self, plan):
                if self.rank == 0:
                    dist.broadcast_object_list([plan], src=0)

            def receive(self):
                box = [None]
                if self.rank != 0:
                    dist.broadcast_object_list(box, src=0)
                return box[0]
        """
    caller = """
        from app.channel import PlanChannel


        def agree(plan):
            channel = PlanChannel()
            channel.publish(plan)
            {receive}
        """
    files = {"app/__init__.py": "", "app/channel.py": channel}
    write(tmp_path, {**files, "app/both.py": caller.format(receive="return channel.receive()")})
    write(tmp_path, {**files, "app/half.py": caller.format(receive="return plan")})
    assert lint(tmp_path / "app/channel.py", tmp_path / "app/both.py") == []
    assert codes_at(lint(tmp_path / "app/half.py")) == [("channel.py", 10, "FSDP007")]


DEVICE_HELPERS = {  # app/device.py's get_device body after `device = torch.device(name)`, and FSDP011 expected
    "torch.cuda.set_device": ("torch.cuda.set_device(int(os.environ['LOCAL_RANK']))", False),
    "a device module found at run time": (
        "getattr(torch, device.type).set_device(int(os.environ['LOCAL_RANK']))",
        False,
    ),
    "no selection": ("pass", True),
}


@pytest.mark.parametrize("selection", DEVICE_HELPERS)
def test_a_device_helper_in_another_module_given_only_a_string_selects_the_device(tmp_path: Path, selection) -> None:
    body, reported = DEVICE_HELPERS[selection]
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/device.py": "import os\nimport torch\n\n\ndef get_device(name):\n"
            f"    device = torch.device(name)\n    {body}\n    return device\n",
            "app/train.py": """
                import torch
                import torch.distributed as dist
                from torch.distributed.fsdp import fully_shard
                from app.device import get_device


                def main():
                    device = get_device("cuda")
                    dist.init_process_group("nccl")
                    fully_shard(torch.nn.Linear(2, 2, device=device))
                """,
        },
    )
    assert [d.code for d in lint(tmp_path / "app/train.py")] == (["FSDP011"] if reported else [])


@pytest.mark.parametrize(
    ("package", "findings"),
    [("app.third_party.torch.distributed.checkpoint", []), ("app.checkpoint", ["FSDP009", "FSDP013"])],
)
def test_a_vendored_copy_of_a_torch_distributed_module_is_torch_s_api(tmp_path: Path, package, findings) -> None:
    """verl ships torch's checkpoint/state_dict.py: its set_model_state_dict is torch's, which uses
    FSDP1's API only for FSDP1 modules. The same body as the project's own helper is its code."""
    folder = package.replace(".", "/")
    files = {f"{'/'.join(folder.split('/')[: n + 1])}/__init__.py": "" for n in range(folder.count("/") + 1)}
    files[f"{folder}/state_dict.py"] = """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


        def set_model_state_dict(model, state_dict):
            with FSDP.state_dict_type(model, "full"):
                return model.load_state_dict(state_dict)
        """
    files["app/train.py"] = f"""
        import torch
        from torch.distributed.fsdp import fully_shard
        from {package}.state_dict import set_model_state_dict


        def main(model):
            fully_shard(model)
            set_model_state_dict(model, torch.load("full.pt"))
        """
    write(tmp_path, files)
    assert sorted(d.code for d in lint(tmp_path / "app/train.py")) == findings


PASSTHROUGHS = {  # passthrough.py, and how train.py passes the model through it
    "function": ("def same(value):\n    return value\n", "same(model)"),
    "constructor and method": (
        "class Holder:\n    def __init__(self, value):\n        self.value = value\n\n"
        "    def get(self):\n        return self.value\n",
        "Holder(model).get()",
    ),
}


BUDGETS = {  # (value flow, all other modules): the FSDP001 lines found
    "both left": ((summaries.MAX_VALUE_FLOW_STEPS, summaries.MAX_FOREIGN_STEPS), [9, 12]),
    "value flow spent": ((0, summaries.MAX_FOREIGN_STEPS), [12]),
    "other modules spent": ((summaries.MAX_VALUE_FLOW_STEPS, 0), []),
}


@pytest.mark.parametrize("spelling", PASSTHROUGHS)
@pytest.mark.parametrize("budget", BUDGETS)
def test_other_modules_are_followed_while_the_file_budgets_last(tmp_path, monkeypatch, budget, spelling) -> None:
    """``passthrough.py`` can satisfy no rule: it is followed for the model passed in while the file's
    value-flow budget lasts. ``parallel.py`` shards: it is followed while the budget for all other
    modules lasts."""
    (value_flow, foreign), lines = BUDGETS[budget]
    monkeypatch.setattr(summaries, "MAX_VALUE_FLOW_STEPS", value_flow)
    monkeypatch.setattr(summaries, "MAX_FOREIGN_STEPS", foreign)
    passthrough, passed = PASSTHROUGHS[spelling]
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/passthrough.py": passthrough,
            "trainer/train.py": f"""
                import torch
                from trainer.model import Model
                from trainer.parallel import shard_model
                from trainer.passthrough import *


                def main():
                    model = Model()
                    opt = torch.optim.AdamW(model.parameters())
                    shard_model({passed})
                    other = Model()
                    other_opt = torch.optim.AdamW(other.parameters())
                    shard_model(other)
                    opt.step()
                    other_opt.step()
                """,
        },
    )
    found = sorted((d.line, d.code) for d in lint(tmp_path / "trainer/train.py"))
    assert found == [(line, "FSDP001") for line in lines]


# state.py: a loading helper whose "sharded" arm, under a property, calls FSDP1's API (FSDP024 on an
# FSDP2 model); train.py: builds the state with the kind it loads, then loads.
LOADING_STATE = """
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


    class State:
        def __init__(self, model, optimizer, state_dict_type):
            self.model = model
            self.optimizer = optimizer
            self.state_dict_type = state_dict_type

        @property
        def sharded_state_dict(self):
            return self.state_dict_type == "sharded"

        def load_optimizer(self, path):
            print("loading", path)
            state = torch.load(path)
            if self.sharded_state_dict:
                state = FSDP.flatten_sharded_optim_state_dict(state, self.model, self.optimizer)
            return state
    """
LOADING_MAIN = """

    def main():
        model = torch.nn.Linear(4, 4)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        state = State(model, optimizer, "{kind}")
        state.load_optimizer("optim.pt")
    """
LOADING_IMPORTS = "import torch\nfrom torch.distributed.fsdp import fully_shard\n\nfrom app.state import State\n"


def flatten_line(path: Path) -> int:
    """The line of ``FSDP.flatten_sharded_optim_state_dict(...)``, where FSDP024 goes."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "flatten_sharded" in line)


def lint_loading(root: Path, monkeypatch, kind: str, budget: int) -> list[tuple[str, int, str]]:
    monkeypatch.setattr(summaries, "MAX_FOREIGN_STEPS", budget)
    main = textwrap.dedent(LOADING_MAIN).format(kind=kind)
    write(root, {"app/__init__.py": "", "app/state.py": LOADING_STATE, "app/train.py": LOADING_IMPORTS + main})
    return codes_at(lint(root / "app/train.py"))


@pytest.mark.parametrize("kind", ["full", "sharded"])
def test_a_call_into_another_module_that_starts_within_the_budget_is_followed_to_its_end(
    tmp_path: Path, monkeypatch, kind
) -> None:
    """The budget for other modules is checked where the linted file calls into one: whichever
    statement it runs out at, a helper it reached is not cut short there, with its property read
    unknown and both arms of the test on it run. So the "sharded" arm of a state built "full" is
    never reported; built "sharded", it is wherever the helper is followed (a budget that runs out
    before the call follows nothing)."""
    budgets = range(0, 20)  # from none to more than the run takes, through each statement of the helper
    found = [lint_loading(tmp_path, monkeypatch, kind, budget) for budget in budgets]
    flatten = ("state.py", flatten_line(tmp_path / "app/state.py"), "FSDP024")
    reported = [flatten in findings for findings in found]
    if kind == "full":
        assert found == [[]] * len(budgets)
        return
    assert reported == sorted(reported)  # not followed at first, then followed to its end
    assert reported[0] is False and reported[-1] is True


def test_the_linted_files_own_code_is_never_cut_short_by_the_budget_for_other_modules(tmp_path, monkeypatch) -> None:
    """The same helper in the linted file: its code is followed whatever the budget for other modules."""
    monkeypatch.setattr(summaries, "MAX_FOREIGN_STEPS", 0)
    monkeypatch.setattr(summaries, "MAX_VALUE_FLOW_STEPS", 0)
    state = "from torch.distributed.fsdp import fully_shard\n" + textwrap.dedent(LOADING_STATE).lstrip()
    train = tmp_path / "app/train.py"
    found = {}
    for kind in ("full", "sharded"):
        main = textwrap.dedent(LOADING_MAIN).format(kind=kind)
        write(tmp_path, {"app/__init__.py": "", "app/train.py": state + main})
        found[kind] = codes_at(lint(train))
    assert found == {"full": [], "sharded": [("train.py", flatten_line(train), "FSDP024")]}


# A trainer whose __init__ builds a config in a module followed only for values (config.py) and whose
# `resume` passes it to a loading helper in another (loading.py); `{methods}`: entry points before it.
TRAINER_WITH_CONFIG = """
    import torch
    from torch.distributed.fsdp import fully_shard

    from app.config import LoadConfig
    from app.loading import load_optimizer


    class Trainer:
        def __init__(self):
            self.model = torch.nn.Linear(4, 4)
            fully_shard(self.model)
            self.optimizer = torch.optim.AdamW(self.model.parameters())
            self.config = LoadConfig("sharded")
    {methods}
        def resume(self):
            return load_optimizer(self.model, self.optimizer, self.config, "optim.pt")
    """
LOADING_HELPER = """
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


    def load_optimizer(model, optimizer, config, path):
        state = torch.load(path)
        if config.kind == "sharded":
            state = FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)
        return state
    """
EARLIER_ENTRY_POINTS = """
        def evaluate(self):
            return self.model(torch.ones(4))

        def fit(self):
            self.model(torch.ones(4)).sum().backward()
            self.optimizer.step()
"""


def test_each_entry_point_follows_values_on_its_own_budget(tmp_path: Path, monkeypatch) -> None:
    """The entry points before ``resume`` (each running ``__init__`` again) do not spend its budget
    for modules followed only for values: whatever that budget, ``resume`` finds what it finds alone."""
    files = {
        "app/__init__.py": "",
        "app/config.py": "class LoadConfig:\n    def __init__(self, kind):\n        self.kind = kind\n",
        "app/loading.py": LOADING_HELPER,
    }
    found = {}
    for methods in ("", EARLIER_ENTRY_POINTS):
        trainer = textwrap.dedent(TRAINER_WITH_CONFIG).format(methods=textwrap.indent(textwrap.dedent(methods), "    "))
        write(tmp_path, {**files, "app/train.py": trainer})
        found[methods] = []
        for budget in range(0, 12):  # from none to more than one entry point needs
            monkeypatch.setattr(summaries, "MAX_VALUE_FLOW_STEPS", budget)
            found[methods].append(codes_at(lint(tmp_path / "app/train.py")))
    alone = found[""]
    assert found[EARLIER_ENTRY_POINTS] == alone
    assert alone[0] == [] and alone[-1] == [("loading.py", flatten_line(tmp_path / "app/loading.py"), "FSDP024")]


def test_a_helper_wrong_on_its_own_is_reported_in_its_module_naming_the_other_file(tmp_path: Path) -> None:
    """The sharding in one module makes a checkpoint helper in another save a sharded state dict."""
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/checkpoint.py": CHECKPOINT,
            "trainer/train.py": """
                from trainer.checkpoint import save
                from trainer.model import Model
                from trainer.parallel import shard_model


                def main():
                    model = shard_model(Model())
                    save(model, "ckpt.pt")
                """,
        },
    )
    found = lint(tmp_path / "trainer/train.py")
    assert [(Path(d.path).name, d.code) for d in found] == [("checkpoint.py", "FSDP004")]
    assert found[0].path == str(tmp_path / "trainer/checkpoint.py") and found[0].line == 5
    assert f"which is sharded at `{tmp_path / 'trainer/parallel.py'}:6`" in found[0].message
    assert [(r.path, r.line, r.message) for r in found[0].related] == [
        (str(tmp_path / "trainer/parallel.py"), 6, "`model` is sharded here")
    ]


def test_the_linted_files_own_findings_come_first_and_related_places_keep_their_columns(tmp_path: Path) -> None:
    """checkpoint.py sorts before train.py, whose own finding still comes first; the sharding both
    findings name is given with its columns (an odd one here)."""
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": """
                from torch.distributed.fsdp import fully_shard


                def shard_model(model):
                    return fully_shard(model)
                """,
            "trainer/checkpoint.py": CHECKPOINT,
            "trainer/train.py": """
                import torch

                from trainer.checkpoint import save
                from trainer.model import Model
                from trainer.parallel import shard_model


                def main():
                    model = shard_model(Model())
                    save(model, "ckpt.pt")
                    torch.save(model.state_dict(), "final.pt")
                """,
        },
    )
    found = lint(tmp_path / "trainer/train.py")
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [
        ("train.py", 11, "FSDP004"),
        ("checkpoint.py", 5, "FSDP004"),
    ]
    sharded_here = (str(tmp_path / "trainer/parallel.py"), 5, 12, 5, 12 + len("fully_shard(model)"))
    assert {(r.path, r.line, r.column, r.end_line, r.end_column) for d in found for r in d.related} == {sharded_here}


def test_a_value_read_back_from_a_merged_checkpoint_dict_is_what_was_merged_under_its_key(tmp_path: Path) -> None:
    """torchtune's shape: the checkpoint client merges the model's state dict and the recipe state
    under key constants of another module; the recipe reads the seed back and saves it in its
    progress record. Only the save of the whole dict holds the sharded state dict; the client's
    `save(checkpoint, ...)` saves what it is given, so the recipe's call that hands it over is reported."""
    write(
        tmp_path,
        {
            "tune/__init__.py": "",
            "tune/keys.py": 'MODEL_KEY = "model"\nSEED_KEY = "seed"\n',
            "tune/client.py": """
                from dataclasses import dataclass

                import torch

                from tune import keys


                @dataclass
                class Progress:
                    seed: int

                    def state_dict(self):
                        return {keys.SEED_KEY: self.seed}


                def load(model):
                    checkpoint = {}
                    checkpoint.update({keys.MODEL_KEY: model.state_dict(), keys.SEED_KEY: 0})
                    return checkpoint


                def save(checkpoint, progress):
                    torch.save(checkpoint, "checkpoint.pt")
                    torch.save(progress.state_dict(), "progress.pt")
                """,
            "tune/recipe.py": """
                import torch
                from torch.distributed.fsdp import fully_shard

                from tune import keys
                from tune.client import Progress, load, save


                class Recipe:
                    def __init__(self):
                        self.model = fully_shard(torch.nn.Linear(4, 4))
                        self.checkpoint = load(self.model)
                        self.seed = self.checkpoint[keys.SEED_KEY]

                    def save(self):
                        save(self.checkpoint, Progress(seed=self.seed))


                Recipe().save()
                """,
        },
    )
    found = lint(tmp_path / "tune/recipe.py")
    recipe = (tmp_path / "tune/recipe.py").read_text().splitlines()
    handed_over = next(n for n, line in enumerate(recipe, 1) if "save(self.checkpoint" in line)
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("recipe.py", handed_over, "FSDP004")]


def test_a_finding_two_linted_files_reach_is_reported_once(tmp_path: Path) -> None:
    test_a_helper_wrong_on_its_own_is_reported_in_its_module_naming_the_other_file(tmp_path)
    (tmp_path / "trainer/eval.py").write_text((tmp_path / "trainer/train.py").read_text())
    found = lint(tmp_path / "trainer/train.py", tmp_path / "trainer/eval.py", tmp_path / "trainer/checkpoint.py")
    assert [(Path(d.path).name, d.code) for d in found] == [("checkpoint.py", "FSDP004")]


def test_import_cycles_terminate_and_still_resolve(tmp_path: Path) -> None:
    train = package(
        tmp_path,
        IMPORT_STYLES["absolute"][0],
        {
            "trainer/optim.py": "from trainer import train as _train\n" + textwrap.dedent(OPTIM),
            "trainer/parallel.py": "import trainer.optim\n" + textwrap.dedent(PARALLEL),
        },
    )
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


def test_a_project_folder_named_torch_never_replaces_torch(tmp_path: Path) -> None:
    train = package(
        tmp_path,
        IMPORT_STYLES["absolute"][0],
        {"torch/__init__.py": "", "torch/distributed/fsdp.py": "def fully_shard(module):\n    return module\n"},
    )
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


@pytest.mark.parametrize("fix", [[], ["--fix", "--unsafe-fixes"]], ids=["check", "fix"])
def test_a_project_s_own_torch_is_reported_once_per_run_as_a_configuration_problem(tmp_path: Path, fix) -> None:
    train = package(
        tmp_path, IMPORT_STYLES["absolute"][0], {"torch.py": "def fully_shard(module):\n    return module\n"}
    )
    (tmp_path / "trainer/eval.py").write_text(train.read_text())
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--no-cache", *fix, "trainer"]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == (0 if fix else 1) and "Traceback" not in run.stderr
    assert run.stderr.splitlines() == [
        f"warning: {tmp_path.resolve() / 'torch.py'}: the project's own `torch` is not analysed: fsdp2-lint treats "
        "`torch` as PyTorch, whose API its rules know by name (rename the project's module to have it followed)"
    ]


def test_a_project_without_its_own_torch_has_no_layout_problem(tmp_path: Path) -> None:
    train = package(tmp_path, IMPORT_STYLES["absolute"][0], {"torch/README": "", "vendor/torch/__init__.py": ""})
    projects = Projects()
    projects.for_file(train)
    assert projects.problems == {}  # a folder without `__init__.py` (a namespace package), one in no import root
    (tmp_path / "torch/__init__.py").write_text("")
    projects = Projects()
    projects.for_file(train)
    assert list(projects.problems) == [tmp_path.resolve() / "torch"]


@pytest.mark.parametrize("module", ["transformers.py", "utils/__init__.py", "logging.py"])
def test_a_project_module_named_like_another_package_is_the_projects(tmp_path: Path, module: str) -> None:
    """Python's path puts the script's folder (the project) before site-packages and the standard
    library: a local `transformers.py` is what `import transformers` runs."""
    name = module.partition("/")[0].removesuffix(".py")
    imports = (
        f"from trainer.model import Model\nfrom trainer.optim import build_optimizer\nfrom {name} import shard_model"
    )
    train = package(tmp_path, imports, {module: PARALLEL})
    assert codes_at(lint(train)) == [("train.py", optimizer_line(train), "FSDP001")]


NO_OP_SHARDING = "def shard_model(model):\n    return model\n"


@pytest.mark.parametrize(
    "files, sharded",
    [
        ({"trainer/parallel/__init__.py": PARALLEL, "trainer/parallel.py": NO_OP_SHARDING}, True),
        ({"trainer/parallel/__init__.py": NO_OP_SHARDING, "trainer/parallel.py": PARALLEL}, False),
        ({"trainer/parallel/README.md": "", "trainer/parallel.py": PARALLEL}, True),  # a folder is no package
    ],
    ids=["package sharding", "module sharding", "namespace folder"],
)
def test_a_package_wins_over_a_module_of_the_same_name(tmp_path: Path, files: dict, sharded: bool) -> None:
    """Python imports `trainer/parallel/__init__.py` before `trainer/parallel.py`, and the module
    before a folder without `__init__.py`: only the one imported shards."""
    train = package(tmp_path, IMPORT_STYLES["absolute"][0], files)
    assert codes_at(lint(train)) == ([("train.py", optimizer_line(train), "FSDP001")] if sharded else [])


@pytest.mark.parametrize(
    "imports, sharded",
    [
        ("from trainer.parallel import shard_model\n\n\n" + NO_OP_SHARDING, False),
        (NO_OP_SHARDING + "\n\nfrom trainer.parallel import shard_model", True),
    ],
    ids=["a local function shadows the import", "an import rebinds the local function"],
)
def test_the_latest_binding_of_a_name_wins(tmp_path: Path, imports: str, sharded: bool) -> None:
    imports = "from trainer.model import Model\nfrom trainer.optim import build_optimizer\n" + imports
    train = package(tmp_path, imports)
    assert codes_at(lint(train)) == ([("train.py", optimizer_line(train), "FSDP001")] if sharded else [])


@pytest.mark.parametrize("sharding_arm", ["if", "else", "neither"])
def test_an_import_in_each_arm_of_an_if_joins_both_modules(tmp_path: Path, sharding_arm: str) -> None:
    """`shard_model` is one of two modules' functions: the analysis follows both, as it joins any
    value an `if` chooses, and a misuse along either is reported."""
    modules = ("parallel", "single") if sharding_arm == "if" else ("single", "parallel")
    imports = (
        "import os\nfrom trainer.model import Model\nfrom trainer.optim import build_optimizer\n"
        f"if os.environ.get('FSDP'):\n    from trainer.{modules[0]} import shard_model\n"
        f"else:\n    from trainer.{modules[1]} import shard_model"
    )
    extra = {"trainer/single.py": NO_OP_SHARDING}
    if sharding_arm == "neither":
        extra["trainer/parallel.py"] = NO_OP_SHARDING
    train = package(tmp_path, imports, extra)
    expected = [] if sharding_arm == "neither" else [("train.py", optimizer_line(train), "FSDP001")]
    assert codes_at(lint(train)) == expected


def test_a_module_the_analysis_cannot_parse_makes_its_names_unknown(tmp_path: Path) -> None:
    train = package(tmp_path, IMPORT_STYLES["absolute"][0], {"trainer/parallel.py": "def shard_model(model:\n"})
    assert lint(train) == []


def test_project_modules_are_read_with_the_configured_max_file_size(tmp_path: Path) -> None:
    """parallel.py is larger than the limit: its names are unknown, as a linted file that large is
    not analysed; a limit it fits in has it followed."""
    padding = "# padding\n" * 400
    train = package(
        tmp_path, IMPORT_STYLES["absolute"][0], {"trainer/parallel.py": textwrap.dedent(PARALLEL) + padding}
    )
    limit = len(train.read_bytes()) + 100
    assert (tmp_path / "trainer/parallel.py").stat().st_size > limit
    assert lint(train, max_file_size=limit) == []
    expected = [("train.py", optimizer_line(train), "FSDP001")]
    assert codes_at(lint(train, max_file_size=100 * limit)) == codes_at(lint(train, max_file_size=0)) == expected


def test_editing_a_helper_invalidates_the_cached_result_of_its_importers(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    train = package(project, IMPORT_STYLES["absolute"][0])
    optim = project / "trainer/optim.py"
    cache = Cache(tmp_path / "cache")
    assert codes_at(lint(train, cache=cache)) == [("train.py", optimizer_line(train), "FSDP001")]
    optim.write_text("def build_optimizer(model):\n    return None\n")
    assert lint(train, cache=cache) == []


def test_the_prefilter_admits_a_file_through_what_it_imports(tmp_path: Path) -> None:
    """train.py names no FSDP API itself: its modules do."""
    train = package(tmp_path, IMPORT_STYLES["absolute"][0])
    assert b"fully_shard" not in train.read_bytes()
    project = Projects().for_file(train)
    reached = {path.name for path, _ in project.imported_sources(train, train.read_bytes())}
    assert reached == {"__init__.py", "model.py", "optim.py", "parallel.py"}  # the package runs first


def test_module_names_come_from_the_import_roots_not_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, {"src/pkg/__init__.py": "", "src/pkg/sub/mod.py": ""})
    monkeypatch.chdir(tmp_path / "src/pkg")
    project = Project(find_root(tmp_path / "src/pkg/sub/mod.py"))
    assert project.module_name(tmp_path / "src/pkg/sub/mod.py") == "pkg.sub.mod"
    assert project.absolute("pkg.sub.mod", 2, "other", is_package=False) == "pkg.other"
    assert project.find("pkg.sub.mod") == (tmp_path / "src/pkg/sub/mod.py").resolve()


def test_importers_are_found_through_other_modules_and_cycles(tmp_path: Path) -> None:
    """train imports sharding, which imports parallel; optim and train import each other."""
    train = package(
        tmp_path,
        "from trainer.sharding import *\nfrom trainer.optim import build_optimizer",
        {
            "trainer/sharding.py": "from .parallel import shard_model\n",
            "trainer/optim.py": "from trainer import train as _train\n" + textwrap.dedent(OPTIM),
        },
    )
    candidates = sorted(path.resolve() for path in (tmp_path / "trainer").glob("*.py"))
    project = Projects().for_file(train)

    def importers(name: str) -> list[str]:
        return [path.name for path in project.importers({(tmp_path / "trainer" / name).resolve()}, candidates)]

    assert importers("parallel.py") == ["optim.py", "sharding.py", "train.py"]  # optim's analysis reaches it too
    assert importers("optim.py") == ["train.py"]
    assert importers("train.py") == ["optim.py"]
    assert importers("model.py") == []  # nothing imports it
    for target in candidates:  # the other way round from what each file's analysis can read
        reading = [c for c in candidates if target in {path for path, _ in project.imported_sources(c, c.read_bytes())}]
        assert project.importers({target}, candidates) == [c for c in reading if c != target]


def test_import_closures_are_the_modules_reachable_without_the_file_itself(tmp_path: Path) -> None:
    """Closures come from memoized import edges, shared across files (cycles included): each is every
    readable module reachable from the file's imports, never through an unreadable one."""
    imports = {n: sorted({(n * 7 + 3) % 24, (n * 5 + 1) % 24, (n + 1) % 24 if n % 3 else n // 2}) for n in range(24)}
    files = {f"m{n}.py": "".join(f"import m{m}\n" for m in targets) for n, targets in imports.items()}
    files["m11.py"] += "#" * 200  # larger than the limit: never read, so never followed
    write(tmp_path, files)
    project = Projects().for_file(tmp_path / "m0.py", max_file_size=150)

    def expected(start: int) -> set[str]:
        reached, pending = set(), [m for m in imports[start] if m != start]
        while pending:
            module = pending.pop()
            if module not in reached and module != start and module != 11:
                reached.add(module)
                pending.extend(imports[module])
        return {f"m{m}.py" for m in reached}

    for n in range(24):
        path = tmp_path / f"m{n}.py"
        found = [found.name for found, _ in project.imported_sources(path, path.read_bytes())]
        assert found == sorted(expected(n))
    assert "m0.py" in expected(3) and "m3.py" in expected(0)  # a cycle, and m0 imports itself
    assert 11 in imports[2] and "m11.py" not in expected(2)  # imported, but too large to read


def test_a_file_s_new_text_is_followed_not_the_one_its_importers_read(tmp_path: Path) -> None:
    """The modules reach the file's text on disk; its closure follows the text given, all the same."""
    write(tmp_path, {"train.py": "import old\n", "old.py": "", "helper.py": "import train\n"})
    train = tmp_path / "train.py"
    project = Projects().for_file(train)
    assert [path.name for path, _ in project.imported_sources(train, b"import old\n")] == ["old.py"]
    assert [path.name for path, _ in project.imported_sources(train, b"import helper\n")] == ["helper.py"]


def test_an_installed_package_is_its_own_project_even_in_a_project_that_holds_the_environment(tmp_path: Path) -> None:
    """A virtual environment inside the project: torch's sources (or any installed package's) never
    reach the environment's other packages as project modules, nor the project around them."""
    (tmp_path / "pyproject.toml").write_text("")
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "lib_a").mkdir(parents=True)
    (site / "lib_a" / "__init__.py").write_text("import lib_b\n")
    (site / "lib_b").mkdir()
    (site / "lib_b" / "__init__.py").write_text("")
    assert find_root(site / "lib_a" / "__init__.py") == site / "lib_a"
    assert find_root(tmp_path / "train.py") == tmp_path
    project = Projects().for_file(site / "lib_a" / "__init__.py")
    assert project.find("lib_b", site / "lib_a" / "__init__.py") is None


def test_a_package_without_project_markers_is_named_from_above_its_top_package(tmp_path: Path) -> None:
    """A copy of torch's sources (no pyproject.toml above): its modules are `torch.*`, so their relative
    imports stay in PyTorch, which is never analysed as project code."""
    package = tmp_path / "torch" / "nn"
    package.mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "functional.py").write_text("from .modules import Linear\n")
    assert find_root(package / "functional.py") == tmp_path
    project = Project(find_root(package / "functional.py"))
    assert project.module_name(package / "functional.py") == "torch.nn.functional"


META_BUILD = """
    import torch
    import torch.nn as nn


    def build_model():
        with torch.device("meta"):
            return nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    """
MATERIALISE = """
    def init_weights(module):
        pass


    def materialise(model):
        model.to_empty(device="cuda")
        model.apply(init_weights)
    """
META_TRAIN = """
    from trainer.build import build_model
    from trainer.init import materialise
    from trainer.parallel import shard_model


    def main(batch):
        model = shard_model(build_model())
        {materialise}
        model(batch).sum().backward()
    """


@pytest.mark.parametrize(
    ("materialise", "found"),
    [
        ("pass", [("build.py", 7, "FSDP006")]),
        ("materialise(model)", []),
        ("materialise(shard_model(Model()))", [("build.py", 7, "FSDP006")]),
    ],
    ids=["helper-never-given-the-model", "helper-given-the-model", "helper-given-another-model"],
)
def test_a_meta_model_is_reported_at_its_construction_unless_its_own_path_materialises_it(
    tmp_path: Path, materialise: str, found: list
) -> None:
    """Materialisation is a fact of each model: a `to_empty()` helper in another module counts
    for the model it is given; the finding goes into the module that builds on meta."""
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/build.py": META_BUILD,
            "trainer/init.py": MATERIALISE,
            "trainer/train.py": META_TRAIN.replace("{materialise}", materialise).replace(
                "from trainer.build", "from trainer.model import Model\n    from trainer.build"
            ),
        },
    )
    diagnostics = lint(tmp_path / "trainer/train.py")
    assert codes_at(diagnostics) == found
    if found:
        assert f"sharded (`{tmp_path / 'trainer/parallel.py'}:" in diagnostics[0].message
        assert [Path(r.path).name for r in diagnostics[0].related] == ["parallel.py"]


def test_a_generic_save_helper_in_another_module_is_reported_at_the_call_that_hands_it_the_state_dict(
    tmp_path: Path,
) -> None:
    """`write(obj, path)` is right on its own: the caller that gives it a sharded state dict is the misuse."""
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/io.py": """
                import torch


                def write(obj, path):
                    torch.save(obj, path)
                """,
            "trainer/train.py": """
                from trainer.io import write
                from trainer.model import Model
                from trainer.parallel import shard_model


                def main():
                    model = shard_model(Model())
                    write(model.state_dict(), "ckpt.pt")
                """,
        },
    )
    found = lint(tmp_path / "trainer/train.py")
    assert codes_at(found) == [("train.py", 8, "FSDP004")]
    assert f"which is sharded at `{tmp_path / 'trainer/parallel.py'}:6`" in found[0].message


@pytest.mark.parametrize("guarded", ["caller", "helper"])
def test_a_rank_0_load_across_modules_is_reported_at_the_statement_the_rank_condition_holds(
    tmp_path: Path, guarded: str
) -> None:
    """A loading helper is right on its own: the caller that runs it on rank 0 only is the misuse;
    a helper that loads on rank 0 only itself is wrong on its own and reported inside."""
    load = "model.load_state_dict(torch.load(path))"
    helper_body = f"if dist.get_rank() == 0:\n        {load}" if guarded == "helper" else load
    call = "load_pretrained(model, 'init.pt')"
    caller_body = f"if dist.get_rank() == 0:\n        {call}" if guarded == "caller" else call
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/io.py": f"import torch\nimport torch.distributed as dist\n\n\ndef load_pretrained(model, path):\n"
            f"    {helper_body}\n",
            "trainer/train.py": "import torch.distributed as dist\n\nfrom trainer.io import load_pretrained\n"
            "from trainer.model import Model\nfrom trainer.parallel import shard_model\n\n\ndef main():\n"
            f"    model = Model()\n    {caller_body}\n    shard_model(model)\n",
        },
    )
    found = lint(tmp_path / "trainer/train.py")
    assert codes_at(found) == ([("train.py", 11, "FSDP010")] if guarded == "caller" else [("io.py", 7, "FSDP010")])
    assert f"sharded at `{tmp_path / 'trainer/parallel.py'}:" in found[0].message


def test_a_clipping_helper_in_another_module_is_reported_at_the_call_that_hands_it_a_stale_list(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/clipping.py": """
                import torch


                def clip(params, max_norm):
                    return torch.nn.utils.clip_grad_norm_(params, max_norm)
                """,
            "trainer/train.py": """
                from trainer.clipping import clip
                from trainer.model import Model
                from trainer.parallel import shard_model


                def main():
                    model = Model()
                    params = list(model.parameters())
                    shard_model(model)
                    clip(params, 1.0)
                """,
        },
    )
    found = lint(tmp_path / "trainer/train.py")
    assert codes_at(found) == [("train.py", 10, "FSDP015")]
    assert f"captured before `fully_shard` (`{tmp_path / 'trainer/parallel.py'}:6`)" in found[0].message


@pytest.mark.parametrize(
    ("restored", "code"), [("model", "FSDP013"), ("opt", "FSDP021")], ids=["model-state", "optimizer-state"]
)
def test_a_restore_helper_in_another_module_is_reported_at_the_call_that_hands_it_a_plain_file(
    tmp_path: Path, restored: str, code: str
) -> None:
    """`restore(obj, state)` is right on its own (it loads what it is given): the caller that reads
    one plain file and hands it over is the misuse, reported in the caller's module."""
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/model.py": MODEL,
            "trainer/parallel.py": PARALLEL,
            "trainer/io.py": "def restore(obj, state):\n    obj.load_state_dict(state)\n",
            "trainer/train.py": "import torch\n\nfrom trainer.io import restore\nfrom trainer.model import Model\n"
            "from trainer.parallel import shard_model\n\n\ndef main():\n    model = shard_model(Model())\n"
            "    opt = torch.optim.AdamW(model.parameters())\n"
            f"    restore({restored}, torch.load('single.pt'))\n",
        },
    )
    assert codes_at(lint(tmp_path / "trainer/train.py")) == [("train.py", 11, code)]


FRAMEWORK_STATE = """
    from torch.distributed.fsdp import fully_shard


    class State:
        def __init__(self, model, parallelism=None):
            self.model = model
            self._fsdp = parallelism.fsdp if parallelism is not None else None
            self._fsdp2 = parallelism.fsdp2 if parallelism is not None else None

        @property
        def fsdp_config(self):
            return self._fsdp2 if self._fsdp2 is not None else self._fsdp

        def apply_fsdp(self):
            fully_shard(self.model)
    """


@pytest.mark.parametrize(
    "test",
    [
        "self.state.fsdp_config is not None",
        "self.state.fsdp_config",
        "self.state._fsdp is not None or self.state._fsdp2 is not None",
        'getattr(self.state, "fsdp_config") is not None',
    ],
)
@pytest.mark.parametrize("given, sharded", [("", False), (", parallelism=config", True)])
def test_a_config_a_framework_state_takes_from_its_constructor_decides_the_sharding_arm_in_another_module(
    tmp_path: Path, test: str, given: str, sharded: bool
) -> None:
    """composer's `Trainer(...)` without a `parallelism_config` shards nothing: the `State` its
    trainer builds in another module keeps the constructor's default None behind a property."""
    trainer = f"""
        from framework.state import State


        class Trainer:
            def __init__(self, model, parallelism=None):
                self.state = State(model, parallelism=parallelism)
                if {test}:
                    self.state.apply_fsdp()
        """
    train = f"""
        import torch
        from framework.trainer import Trainer

        trainer = Trainer(Net(){given})
        torch.save(trainer.state.model.state_dict(), "model.pt")
        """
    files = {"framework/__init__.py": "", "framework/state.py": FRAMEWORK_STATE, "framework/trainer.py": trainer}
    write(tmp_path, {**files, "train.py": train})
    assert codes_at(lint(tmp_path / "train.py")) == ([("train.py", 5, "FSDP004")] if sharded else [])
