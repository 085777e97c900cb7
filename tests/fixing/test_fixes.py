"""Autofix guarantees, for every fix a rule declares: over every rule's invalid examples, every bad fixture
and the style cases (tests/support/style_cases), fixing (unsafe fixes included) gives a file that parses,
re-linting it reports none of the fixed diagnostics and nothing new, fixing again changes nothing, and a
diagnostic's text edits (what editors apply) give the same file as the CLI's fix. Then what each fix
writes, and where it must offer none; line endings, BOM and encoding declarations round-trip byte for
byte."""

from __future__ import annotations

import textwrap
from collections import Counter

import libcst as cst
import pytest
from fix_samples import FIXABLE, FIXABLE_SAFE_FIXED, ROUND_TRIP, apply_edits, case
from fixture_marks import ROOT, fixture_files
from style_cases import CASES as STYLE_CASES

from fsdp2_lint.analysis.syntax import source_lines
from fsdp2_lint.diagnostics import Applicability, Diagnostic
from fsdp2_lint.engine import fix_source, lint_source
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, all_rules
from fsdp2_lint.rule_docs import fix_table

RULES = {rule.code: rule for rule in all_rules()}
CASES = (
    [
        pytest.param(source.encode(), [rule], id=f"{rule.code}-invalid{index}")
        for rule in all_rules()
        for index, source in enumerate(rule.invalid)
    ]
    + [
        pytest.param(path.read_bytes(), None, id=f"{path.parent.name}/{path.name}")
        for path in fixture_files()
        if path.name.startswith("bad_")
    ]
    + [
        pytest.param(textwrap.dedent(source).encode(), [RULES[name.split("-", 1)[0].upper()]], id=f"style-{name}")
        for name, source in sorted(STYLE_CASES.items())
        if "# expect:" in source
    ]
)
# Fixes no example, fixture or style case shows: FSDP022's unsafe one drops `device_id`.
CASES += [
    pytest.param(
        b"import torch\nfrom torch.distributed.fsdp import fully_shard\n\n"
        b"model = torch.nn.Linear(2, 2)\nfully_shard(model, device_id=torch.cuda.current_device())\n",
        [RULES["FSDP022"]],
        id="FSDP022-drops-device_id",
    )
]


def fixed_text(source: str, unsafe: bool = True, rules=None) -> str:
    return fix_source(source.encode(), "train.py", rules, unsafe).source.decode()


@pytest.mark.parametrize("source, rules", CASES)
def test_fixes_parse_resolve_their_diagnostics_and_are_idempotent(source, rules):
    before = lint_source(source, "train.py", rules)
    result = fix_source(source, "train.py", rules, unsafe=True)
    cst.parse_module(result.source)
    compile(result.source, "train.py", "exec")
    assert Counter(d.code for d in result.remaining) == Counter(d.code for d in before if d.fix is None)
    assert [d.code for d in result.remaining if d.fix is not None] == []  # none fixable is left
    assert Counter(d.code for d in result.fixed) == Counter(d.code for d in before if d.fix is not None)
    again = fix_source(result.source, "train.py", rules, unsafe=True)
    assert (again.source, again.fixed) == (result.source, ())
    safe_only = fix_source(source, "train.py", rules, unsafe=False)
    assert [d.code for d in safe_only.fixed if d.fix.applicability is not Applicability.SAFE] == []
    assert Counter(d.code for d in safe_only.remaining) == Counter(
        d.code for d in before if d.fix is None or d.fix.applicability is Applicability.UNSAFE
    )


@pytest.mark.parametrize("source, rules", CASES)
def test_a_diagnostics_edits_make_the_same_file_as_the_cli_fix(source, rules):
    fixable = [d for d in lint_source(source, "train.py", rules) if d.fix is not None]
    for diagnostic in fixable:
        alone = [d for d in fixable if d is not diagnostic]  # fix this one only: the others are noqa'd
        suppressed = _with_noqa(source.decode(), alone)
        expected = fix_source(suppressed.encode(), "train.py", rules, unsafe=True)
        (again,) = [d for d in lint_source(suppressed.encode(), "train.py", rules) if d.fix is not None]
        assert apply_edits(suppressed, again) == expected.source.decode()


def test_each_rule_offers_the_fixes_it_declares_and_no_other():
    """A rule's ``fix_offer`` is what its findings carry: over the cases, a rule that declares one
    offers a fix of each applicability it declares, and a rule that declares none offers no fix."""
    offered: dict[str, set[Applicability]] = {}
    for param in CASES:
        source, rules = param.values
        for d in lint_source(source, "train.py", rules):
            if d.fix is not None:
                offered.setdefault(d.code, set()).add(d.fix.applicability)
    declared = {rule.code: set(rule.fix_offer.applicabilities) for rule in all_rules() if rule.fix_offer}
    assert offered == declared


def test_readmes_fix_table_is_generated_from_the_rules():
    section = (ROOT / "README.md").read_text().split("\n## Fixes\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == fix_table(all_rules())


def _with_noqa(source: str, diagnostics: list[Diagnostic]) -> str:
    lines = source_lines(source)
    for d in diagnostics:
        line = lines[d.line - 1]
        body = line.rstrip("\r\n")
        lines[d.line - 1] = f"{body}  # noqa: {d.code}{line[len(body) :]}"
    return "".join(lines)


# --- what each fix writes ------------------------------------------------------------------


def test_fsdp003_calls_the_module_keeping_the_comment_and_spacing():
    source = case("""\
        fully_shard(model)
        logits  =  model.forward( batch ,  mask=m )   # logits
        """)
    assert fixed_text(source) == source.replace("model.forward( batch", "model( batch")


CONTAINERS = """\
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
heads = nn.ModuleDict({"a": nn.Linear(4, 4)})
"""


def test_fsdp025_shards_each_module_of_the_container_with_the_calls_arguments():
    source = CONTAINERS + "fully_shard(blocks, mesh=mesh)  # layers\n    \nfully_shard(heads)\n"
    assert fixed_text(source) == CONTAINERS + (
        "for block in blocks:  # layers\n    fully_shard(block, mesh=mesh)\n    \n"
        "for block in heads.values():\n    fully_shard(block)\n"
    )


@pytest.mark.parametrize(
    "statement",
    ["sharded = fully_shard(blocks)", "fully_shard(module=blocks)", "fully_shard(blocks); step()"],
)
def test_fsdp025_offers_no_fix_where_the_call_is_more_than_a_statement_of_its_own(statement):
    [diagnostic] = lint_source((CONTAINERS + statement + "\n").encode(), "train.py")
    assert diagnostic.code == "FSDP025" and diagnostic.fix is None


def test_fsdp025_names_the_loop_variable_after_no_name_the_file_uses():
    source = CONTAINERS + "block = blocks[0]\nfully_shard(blocks)\n"
    assert "for child in blocks:\n    fully_shard(child)\n" in fixed_text(source)


TIED = """\
from torch.distributed.fsdp import fully_shard

model.head.weight = model.emb.weight
"""


def test_fsdp018_groups_two_adjacent_calls_in_the_first_calls_place():
    source = (
        TIED
        + "# embeddings\nfully_shard(model.head, mesh=m)  # head\nfully_shard(model.emb, mesh=m)\nfully_shard(model)\n"
    )
    assert fixed_text(source, unsafe=False) == TIED + (
        "# embeddings\nfully_shard([model.head, model.emb], mesh=m)  # head\nfully_shard(model)\n"
    )


@pytest.mark.parametrize(
    "calls",
    [
        "fully_shard(model.emb, mesh=m)\nfully_shard(model.head, mesh=n)\n",  # another mesh
        "fully_shard(model.emb, mesh=m)\nfully_shard(model.head)\n",  # an argument missing
        "fully_shard(model.emb)\nstep()\nfully_shard(model.head)\n",  # not adjacent
        "fully_shard(model.emb)\nfully_shard(model.norm)\n",  # the neighbour is not the tied module
        "fully_shard(model.emb)\nhead = fully_shard(model.head)\n",  # a result used
        "fully_shard(model.emb)\nfully_shard(model.head)  # keep me\n",  # the removed line's comment
        "fully_shard(model.emb); fully_shard(model.head)\n",  # one line
    ],
)
def test_fsdp018_offers_no_fix_unless_the_two_calls_are_adjacent_and_alike(calls):
    [diagnostic] = [d for d in lint_source((TIED + calls + "fully_shard(model)\n").encode(), "train.py")]
    assert diagnostic.code == "FSDP018" and diagnostic.fix is None


def test_fsdp018_does_not_group_a_module_with_the_root():
    [diagnostic] = lint_source((TIED + "fully_shard(model.emb)\nfully_shard(model)\n").encode(), "train.py")
    assert diagnostic.code == "FSDP018" and diagnostic.fix is None


def test_fsdp018_offers_no_fix_for_a_loop_over_the_tied_modules():
    source = TIED + "for module in [model.emb, model.head]:\n    fully_shard(module)\nfully_shard(model)\n"
    [diagnostic] = lint_source(source.encode(), "train.py")
    assert diagnostic.code == "FSDP018" and diagnostic.fix is None


HF_TIED = """\
from transformers import AutoModelForCausalLM
from torch.distributed.fsdp import fully_shard

model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
"""


def test_fsdp018_groups_a_library_models_embeddings_named_by_attribute():
    source = HF_TIED + "fully_shard(model.model.embed_tokens, mesh=m)\nfully_shard(model.lm_head, mesh=m)\n"
    assert fixed_text(source, unsafe=False) == HF_TIED + "fully_shard([model.model.embed_tokens, model.lm_head], mesh=m)\n"


GENERATOR = """\
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4)
        self.head = nn.Linear(4, 8)

    def forward(self, x):
        return self.head(self.emb(x))

    def generate(self, x):
        return self.head(self.emb(x)).argmax(-1)


model = Net()
"""


def test_fsdp019_registers_the_method_right_after_the_models_fully_shard():
    source = GENERATOR + "fully_shard(model, mesh=mesh)\nstep(model)\nmodel.generate(tok)\n"
    fixed = fixed_text(source)
    assert "from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method\n" in fixed
    assert 'fully_shard(model, mesh=mesh)\nregister_fsdp_forward_method(model, "generate")\nstep(model)\n' in fixed


def test_fsdp019_offers_no_registration_for_a_module_that_is_not_sharded_itself():
    outer = (
        "class Outer(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.net = Net()\n\n\n"
    )
    source = GENERATOR.replace("model = Net()", outer + "model = Outer()")
    source += "fully_shard(model)\nmodel.net.generate(tok)\n"
    [diagnostic] = [d for d in lint_source(source.encode(), "train.py") if d.code == "FSDP019"]
    assert diagnostic.fix is None


def test_fsdp003_offers_no_fix_for_a_stored_bound_method():
    source = case("""\
        fully_shard(model)
        step = model.forward
        out = step(batch)
        """)
    (diagnostic,) = lint_source(source.encode(), "train.py")
    assert diagnostic.code == "FSDP003" and diagnostic.fix is None


def test_fsdp005_wraps_the_block_in_try_finally_and_keeps_its_comments():
    source = case("""\
        fully_shard(model)
        for step in range(4):
            # accumulate without syncing
            with model.no_sync():  # micro-batch
                loss = model(batch).sum()  # forward
                loss.backward()
            optimizer.step()
        """)
    assert fixed_text(source) == case("""\
        fully_shard(model)
        for step in range(4):
            # accumulate without syncing
            model.set_requires_gradient_sync(False)  # micro-batch
            try:
                loss = model(batch).sum()  # forward
                loss.backward()
            finally:
                model.set_requires_gradient_sync(True)
            optimizer.step()
        """)


def test_fsdp011_inserts_set_device_and_adds_import_os_where_isort_would():
    source = """\
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

# the process group
dist.init_process_group("nccl")
fully_shard(model.cuda())
"""
    expected = """\
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

# the process group
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
fully_shard(model.cuda())
"""
    assert fixed_text(source) == expected


def test_fsdp011_guards_set_device_when_the_script_may_run_without_cuda():
    source = """\
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    fully_shard(model.to(device))

main()
"""
    assert fixed_text(source) == source.replace(
        '    dist.init_process_group("nccl" if',
        '    if torch.cuda.is_available():\n        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
        '    dist.init_process_group("nccl" if',
    )


def test_fsdp011_offers_no_fix_when_the_script_spawns_its_own_processes():
    source = """\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard

def worker(rank):
    dist.init_process_group("nccl", rank=rank, world_size=2)
    fully_shard(model.cuda())

mp.spawn(worker, nprocs=2)
"""
    (diagnostic,) = lint_source(source.encode(), "train.py")
    assert diagnostic.code == "FSDP011" and diagnostic.fix is None


def test_fsdp015_clips_the_modules_current_parameters():
    source = case("""\
        params = list(model.parameters())
        fully_shard(model)
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        """)
    assert fixed_text(source) == source.replace("clip_grad_norm_(params,", "clip_grad_norm_(model.parameters(),")


@pytest.mark.parametrize(
    "body",
    [
        # `model` names another module at the clip
        """\
        model = Net()
        params = list(model.parameters())
        fully_shard(model)
        model = other
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        """,
        # the clip is in a helper, where `model` is not the module
        """\
        params = list(model.parameters())
        fully_shard(model)

        def clip(params):
            torch.nn.utils.clip_grad_norm_(params, 1.0)

        clip(params)
        """,
        # a filtered list: not all of the module's parameters
        """\
        params = [p for p in model.parameters() if p.requires_grad]
        fully_shard(model)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        """,
        # `nonlocal`: a closure beside this one may rebind `model` (here `restore`)
        """\
        def train():
            model = None

            def restore():
                nonlocal model
                model = other

            def step():
                nonlocal model
                model = Net()
                params = list(model.parameters())
                fully_shard(model)
                restore()
                torch.nn.utils.clip_grad_norm_(params, 1.0)

            step()
        """,
        # `global`: another function may rebind `model` (here `restore`)
        """\
        def step():
            global model
            model = Net()
            params = list(model.parameters())
            fully_shard(model)
            restore()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        """,
    ],
    ids=["rebound", "helper", "filtered", "nonlocal", "global"],
)
def test_fsdp015_offers_no_fix_when_the_module_is_not_certain(body):
    diagnostics = lint_source(case(body).encode(), "train.py")
    assert [d.code for d in diagnostics] == ["FSDP015"] and diagnostics[0].fix is None


def test_fsdp022_rewrites_strategies_and_mesh_and_drops_what_fsdp2_does_without():
    source = case("""\
        from torch.distributed.fsdp import ShardingStrategy

        strategy = ShardingStrategy.SHARD_GRAD_OP
        for block in model.layers:
            fully_shard(block, mesh, sharding_strategy=strategy, limit_all_gathers=True)
        fully_shard(
            model,
            mesh=mesh,  # data parallel
            sharding_strategy=ShardingStrategy.FULL_SHARD,
            use_orig_params=True,  # for torch.compile
        )
        """)
    result = fix_source(source.encode(), "train.py")
    assert [d.fix.applicability for d in result.fixed] == [Applicability.SAFE, Applicability.SAFE]
    assert result.source.decode() == case("""\
        from torch.distributed.fsdp import ShardingStrategy

        strategy = ShardingStrategy.SHARD_GRAD_OP
        for block in model.layers:
            fully_shard(block, mesh=mesh, reshard_after_forward=False)
        fully_shard(
            model,
            mesh=mesh,  # data parallel
            reshard_after_forward=True,
        )
        """)


def test_fsdp022_dropping_what_changes_behaviour_is_unsafe_and_says_why():
    source = case("fully_shard(model, mesh=mesh, sync_module_states=True, device_id=rank)\n")
    (diagnostic,) = lint_source(source.encode(), "train.py")
    assert diagnostic.fix.applicability is Applicability.UNSAFE
    assert "does not broadcast rank 0's weights" in diagnostic.fix.description
    assert "current* device" in diagnostic.fix.description
    assert fixed_text(source, unsafe=False) == source
    assert fixed_text(source) == case("fully_shard(model, mesh=mesh)\n")


def test_fsdp022_renames_fsdp1s_device_mesh_keyword_to_mesh():
    source = case("fully_shard(model, device_mesh=mesh, reshard_after_forward=True)\n")
    (diagnostic,) = lint_source(source.encode(), "train.py")
    assert "`device_mesh`" in diagnostic.message and diagnostic.fix.applicability is Applicability.SAFE
    assert fixed_text(source, unsafe=False) == case("fully_shard(model, mesh=mesh, reshard_after_forward=True)\n")
    both = case("fully_shard(model, mesh=mesh, device_mesh=mesh)\n")
    assert [d.fix for d in lint_source(both.encode(), "train.py")] == [None]  # which one was meant?


@pytest.mark.parametrize(
    "call",
    [
        "fully_shard(model, auto_wrap_policy=policy, use_orig_params=True)",
        "fully_shard(model, sharding_strategy=ShardingStrategy.HYBRID_SHARD)",
        "fully_shard(model, **fsdp_kwargs)",
        "fully_shard(model, sharding_strategy=ShardingStrategy.FULL_SHARD, reshard_after_forward=False)",
    ],
    ids=["auto-wrap", "hybrid", "kwargs", "both"],
)
def test_fsdp022_offers_no_fix_without_a_mechanical_fsdp2_form(call):
    source = case(
        f"from torch.distributed.fsdp import ShardingStrategy\nfsdp_kwargs = dict(use_orig_params=True)\n{call}\n"
    )
    diagnostics = lint_source(source.encode(), "train.py")
    assert [d.code for d in diagnostics] == ["FSDP022"] and diagnostics[0].fix is None


def test_fsdp023_converts_policies_and_extends_the_import_in_isort_order():
    source = """\
import torch
from torch.distributed.fsdp import CPUOffload, MixedPrecision, fully_shard

mixed = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
fully_shard(model, offload_policy=CPUOffload(offload_params=True), mp_policy=mixed)
"""
    precision, offload = lint_source(source.encode(), "train.py")
    assert precision.fix.applicability is Applicability.SAFE  # it failed at the first forward before
    assert offload.fix.applicability is Applicability.UNSAFE and "offloading starts" in offload.fix.description
    expected = """\
import torch
from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy, MixedPrecision, MixedPrecisionPolicy, fully_shard

mixed = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
fully_shard(model, offload_policy=CPUOffloadPolicy(), mp_policy=mixed)
"""
    assert fixed_text(source) == expected


def test_fsdp023_adds_the_policies_to_a_parenthesized_import_without_copying_its_comments():
    source = """\
import torch
from torch.distributed.fsdp import (
    CPUOffload,  # FSDP1's, until the migration
    FSDPModule,  # the type the trainer checks
    MixedPrecision,
    fully_shard,
)

fully_shard(model, offload_policy=CPUOffload(offload_params=True), mp_policy=MixedPrecision(param_dtype=torch.bfloat16))
"""
    expected = """\
import torch
from torch.distributed.fsdp import (
    CPUOffload,  # FSDP1's, until the migration
    CPUOffloadPolicy,
    FSDPModule,  # the type the trainer checks
    MixedPrecision,
    MixedPrecisionPolicy,
    fully_shard,
)

fully_shard(model, offload_policy=CPUOffloadPolicy(), mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
"""
    assert fixed_text(source) == expected


def test_fsdp023_appends_the_policy_to_a_parenthesized_import_whose_last_name_keeps_its_comment():
    source = """\
from torch.distributed.fsdp import (
    BackwardPrefetch,
    CPUOffload,  # FSDP1's, until the migration
)
from torch.distributed.fsdp import fully_shard

fully_shard(model, offload_policy=CPUOffload(offload_params=True))
"""
    expected = """\
from torch.distributed.fsdp import (
    BackwardPrefetch,
    CPUOffload,  # FSDP1's, until the migration
    CPUOffloadPolicy,
)
from torch.distributed.fsdp import fully_shard

fully_shard(model, offload_policy=CPUOffloadPolicy())
"""
    assert fixed_text(source) == expected


@pytest.mark.parametrize(
    "imports, fixed_imports",
    [
        (  # the line's names in isort's order: `BackwardPrefetch` is a class, sorted before `CPUOffload`
            "from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, MixedPrecision, fully_shard\n",
            "from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, CPUOffloadPolicy, MixedPrecision, fully_shard\n",
        ),
        (  # no line imports from torch.distributed.fsdp: a new one after the last import
            "from torch.distributed._composable.fsdp import fully_shard\nfrom torch.distributed.fsdp.api import CPUOffload\n",
            "from torch.distributed._composable.fsdp import fully_shard\nfrom torch.distributed.fsdp.api import CPUOffload\n"
            "from torch.distributed.fsdp import CPUOffloadPolicy\n",
        ),
        (  # it sorts after every name in the line: it goes last
            "from torch.distributed.fsdp import BackwardPrefetch, CPUOffload\n"
            "from torch.distributed._composable.fsdp import fully_shard\n",
            "from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, CPUOffloadPolicy\n"
            "from torch.distributed._composable.fsdp import fully_shard\n",
        ),
        (  # a two-letter upper-case name is a constant, sorted first (isort's and Ruff's rule)
            "from torch.distributed.fsdp import DP, BackwardPrefetch, CPUOffload, fully_shard\n",
            "from torch.distributed.fsdp import DP, BackwardPrefetch, CPUOffload, CPUOffloadPolicy, fully_shard\n",
        ),
        (  # a one-letter upper-case name is a class, sorted among the classes
            "from torch.distributed.fsdp import CPUOffload, T, fully_shard\n",
            "from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy, T, fully_shard\n",
        ),
    ],
    ids=["extended", "new-line", "appended", "two-letter-constant", "one-letter-class"],
)
def test_fsdp023_adds_the_policy_to_the_import_line_in_order_or_a_new_line_after_the_imports(imports, fixed_imports):
    call = "\nfully_shard(model, offload_policy=CPUOffload(offload_params=True))\n"
    fixed_call = "\nfully_shard(model, offload_policy=CPUOffloadPolicy())\n"
    assert (
        fixed_text("import os\nimport torch\n" + imports + call)
        == "import os\nimport torch\n" + fixed_imports + fixed_call
    )


def test_fsdp023_names_the_policy_through_a_module_alias():
    source = """\
import torch.distributed.fsdp as fsdp

fsdp.fully_shard(model, offload_policy=fsdp.CPUOffload(offload_params=True))
"""
    assert fixed_text(source) == source.replace("fsdp.CPUOffload(offload_params=True)", "fsdp.CPUOffloadPolicy()")


@pytest.mark.parametrize(
    "body",
    [
        # FSDP1-only fields have no FSDP2 equivalent
        "fully_shard(model, mp_policy=MixedPrecision(param_dtype=torch.bfloat16, buffer_dtype=torch.float32))\n",
        # the FSDP1 wrapper of another model needs the same object as it is
        "mixed = MixedPrecision(param_dtype=torch.bfloat16)\nteacher = FSDP(teacher, mixed_precision=mixed)\n"
        "fully_shard(model, mp_policy=mixed)\n",
        # no offloading was asked for
        "fully_shard(model, offload_policy=CPUOffload())\n",
    ],
    ids=["buffer-dtype", "shared-with-fsdp1", "no-offload"],
)
def test_fsdp023_offers_no_fix_when_the_translation_is_not_exact(body):
    source = (
        "import torch\nfrom torch.distributed.fsdp import CPUOffload, MixedPrecision, fully_shard\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n" + body
    )
    diagnostics = [d for d in lint_source(source.encode(), "train.py") if d.code == "FSDP023"]
    assert diagnostics and all(d.fix is None for d in diagnostics)


def test_fsdp024_uses_torch_clipping_and_the_module_itself():
    source = """\
from torch.distributed.fsdp import fully_shard

fully_shard(model)
norm = model.clip_grad_norm_(1.0, norm_type=2.0)
state = model.module.state_dict()
"""
    expected = """\
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=2.0)
state = model.state_dict()
"""
    assert fixed_text(source) == expected


def test_an_import_several_fixes_need_is_added_once_below_the_docstring():
    source = """\
\"\"\"Train.\"\"\"

from torch.distributed.fsdp import fully_shard

fully_shard(model)
model.clip_grad_norm_(1.0)
model.clip_grad_norm_(max_norm=2.0)
"""
    expected = """\
\"\"\"Train.\"\"\"

import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
"""
    assert fixed_text(source) == expected


def test_fsdp001_moves_the_optimizer_after_the_last_shard_as_an_unsafe_fix():
    source = case("""\
        model = Net()
        # the optimizer
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        opt.step()
        """)
    assert fixed_text(source, unsafe=False) == source
    assert fixed_text(source) == case("""\
        model = Net()

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        # the optimizer
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        opt.step()
        """)


@pytest.mark.parametrize(
    "body",
    [
        # the statements it would jump over use it
        """\
        opt = torch.optim.AdamW(model.parameters())
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
        fully_shard(model)
        opt.step()
        """,
        # built from a list captured earlier: moving the construction does not help
        """\
        params = list(model.parameters())
        opt = torch.optim.AdamW(params)
        fully_shard(model)
        opt.step()
        """,
        # in a block that does not hold the shard
        """\
        if train:
            opt = torch.optim.AdamW(model.parameters())
        fully_shard(model)
        opt.step()
        """,
    ],
    ids=["used-in-between", "captured-earlier", "other-block"],
)
def test_fsdp001_offers_no_move_that_would_break_the_code_or_not_help(body):
    diagnostics = lint_source(case(body).encode(), "train.py", [RULES["FSDP001"]])
    assert [d.code for d in diagnostics] == ["FSDP001"] and diagnostics[0].fix is None


def test_fsdp002_moves_the_root_after_its_blocks_and_allows_rebinding_it():
    source = case("""\
        model = fully_shard(model)
        for block in model.layers:
            fully_shard(block)
        optimizer = torch.optim.AdamW(model.parameters())
        """)
    assert fixed_text(source) == case("""\
        for block in model.layers:
            fully_shard(block)
        model = fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        """)


def test_fsdp001_moves_the_optimizer_after_a_conditional_shard_holding_block():
    source = case("""\
        opt = torch.optim.AdamW(model.parameters())
        if shard:
            fully_shard(model)
        opt.step()
        """)
    assert fixed_text(source, rules=[RULES["FSDP001"]]) == case("""\
        if shard:
            fully_shard(model)
        opt = torch.optim.AdamW(model.parameters())
        opt.step()
        """)


def test_fsdp002_offers_no_move_when_the_code_in_between_uses_what_it_binds():
    source = case("""\
        sharded = fully_shard(model)
        for block in sharded.layers:
            fully_shard(block)
        """)
    (diagnostic,) = lint_source(source.encode(), "train.py")
    assert diagnostic.code == "FSDP002" and diagnostic.fix is None


@pytest.mark.parametrize("gap", ["\n", ""], ids=["blank-line-after-imports", "code-right-after-imports"])
def test_overlapping_fixes_are_applied_over_several_rounds(gap):
    """Both FSDP002 fixes move `fully_shard(model)`: applied in one round, it could be inserted twice."""
    imports = "import torch\nfrom torch.distributed.fsdp import fully_shard\n" + gap
    source = imports + textwrap.dedent("""\
        fully_shard(model)
        for block in model.layers:
            fully_shard(block)
        fully_shard(model.head)
        """)
    result = fix_source(source.encode(), "train.py", unsafe=True)
    assert [d.code for d in result.fixed] == ["FSDP002", "FSDP002"] and result.remaining == ()
    assert result.source.decode() == imports + textwrap.dedent("""\
        for block in model.layers:
            fully_shard(block)
        fully_shard(model.head)
        fully_shard(model)
        """)


# --- byte-exact round trips ------------------------------------------------------------------


@pytest.mark.parametrize("source", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_crlf_line_endings_are_kept_everywhere_including_inserted_lines(source):
    fixed = fixed_text(source)
    assert fixed != source
    crlf = fix_source(source.replace("\n", "\r\n").encode(), "train.py", unsafe=True).source
    assert crlf == fixed.replace("\n", "\r\n").encode()
    assert b"\n" not in crlf.replace(b"\r\n", b"")


@pytest.mark.parametrize("source", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_a_byte_order_mark_is_kept(source):
    fixed = fix_source(b"\xef\xbb\xbf" + source.encode(), "train.py", unsafe=True).source
    assert fixed == b"\xef\xbb\xbf" + fixed_text(source).encode()


@pytest.mark.parametrize("source", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_the_encoding_declaration_and_the_files_encoding_are_kept(source):
    declared = "# -*- coding: latin-1 -*-\n" + source
    fixed = fix_source(declared.encode("latin-1"), "train.py", unsafe=True).source
    assert fixed == ("# -*- coding: latin-1 -*-\n" + fixed_text(source)).encode("latin-1")
    assert "café".encode("latin-1") in fixed


def test_untouched_code_is_byte_identical_and_only_the_fixed_lines_change():
    source = case("""\
        x = {  'odd' :1,   # keep   this
              }\t# tabs\x0c
        fully_shard(model)



        y = model.forward( x )  ;  z = 1
        """).replace("\n", "\r\n", 2)  # mixed line endings too
    fixed = fix_source(source.encode(), "train.py").source.decode()
    changed = [(a, b) for a, b in zip(source_lines(source), source_lines(fixed), strict=True) if a != b]
    assert changed == [("y = model.forward( x )  ;  z = 1\n", "y = model( x )  ;  z = 1\n")]


def test_a_file_that_does_not_parse_is_left_as_it_is():
    source = case("fully_shard(model)\nout = model.forward(x)\ndef broken(:\n").encode()
    result = fix_source(source, "train.py", unsafe=True)
    assert result.source == source and result.fixed == ()
    assert [d.code for d in result.remaining] == ["FSDP000"]


# What a faulty fix could leave in place of the file's first statement: code that does not parse,
# an encoding declaration naming a codec that is no text encoding.
FAULTY_FIRST_STATEMENTS = {
    "syntax": cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Call(cst.Name("step")))], cst.Name("x"))]),
    "codec": cst.SimpleStatementLine(
        [cst.Expr(cst.Name("torch"))], leading_lines=[cst.EmptyLine(comment=cst.Comment("# -*- coding: rot13 -*-"))]
    ),
}


@pytest.mark.parametrize("first", FAULTY_FIRST_STATEMENTS.values(), ids=FAULTY_FIRST_STATEMENTS.keys())
def test_a_fix_whose_result_does_not_parse_is_dropped(monkeypatch, first):
    """Even when the result no longer names anything a rule looks for, so that linting it never
    parses it: the fix must not break the user's file."""

    def faulty_fix(self, facts):
        body = facts.module.body
        replacements = {body[0]: first, **{statement: cst.RemoveFromParent() for statement in body[1:]}}
        yield Finding(body[-1], fix=Rewrite("keep one statement", replacements))

    monkeypatch.setattr(RULES["FSDP003"], "check", faulty_fix)
    source = case("fully_shard(model)\nout = model.forward(x)\n").encode()
    result = fix_source(source, "train.py", [RULES["FSDP003"]])
    assert result.source == source and result.fixed == ()


def test_a_safe_fix_after_an_unsafe_one_is_applied_without_unsafe_fixes():
    result = fix_source(FIXABLE.encode(), "train.py")  # FSDP001's unsafe fix comes first in the file
    assert result.source.decode() == FIXABLE_SAFE_FIXED
    assert [d.code for d in result.fixed] == ["FSDP003"]


def test_noqa_keeps_a_diagnostic_and_its_fix_out_of_fixing():
    source = case("fully_shard(model)\nout = model.forward(x)  # noqa: FSDP003\n")
    assert fixed_text(source) == source


def test_fsdp011_calls_torchs_set_device_when_the_file_imports_another_set_device():
    source = (
        "import torch.distributed as dist\nfrom torch.distributed.fsdp import fully_shard\n"
        "from mylib.devices import set_device\n\n"
        'dist.init_process_group(backend="nccl")\nfully_shard(model.cuda())\n'
    )
    fixed = fixed_text(source, rules=[RULES["FSDP011"]])
    assert 'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))' in fixed
    assert "\nimport torch\n" in fixed


FSDP022_TRAILING = "import torch\nfrom torch.distributed.fsdp import fully_shard\n\nmodel = torch.nn.Linear(2, 2)\n"
DROPPED_LAST_ARGUMENT = {
    "the kept argument's comment stays, after a comma": (
        "fully_shard(\n    model,  # the whole model\n    limit_all_gathers=True\n)\n",
        "fully_shard(\n    model,  # the whole model\n)\n",
    ),
    "the closing parenthesis keeps its indentation": (
        "fully_shard(\n    model,  # the whole model\n    limit_all_gathers=True\n    )\n",
        "fully_shard(\n    model,  # the whole model\n    )\n",
    ),
    "no comment: the call ends as it did, without a comma": (
        "fully_shard(\n    model,\n    limit_all_gathers=True\n)\n",
        "fully_shard(\n    model\n)\n",
    ),
}


@pytest.mark.parametrize(("call", "expected"), DROPPED_LAST_ARGUMENT.values(), ids=DROPPED_LAST_ARGUMENT.keys())
def test_fsdp022_dropping_the_last_argument_of_a_call_split_over_lines(call, expected):
    assert fixed_text(FSDP022_TRAILING + call, rules=[RULES["FSDP022"]]) == FSDP022_TRAILING + expected


def test_fsdp001_moving_the_optimizer_past_a_blank_line_and_a_comment_keeps_one_blank_line():
    source = case("""\
        model = Net()

        opt = torch.optim.AdamW(model.parameters())

        # shard the model
        fully_shard(model)
        opt.step()
        """)
    assert fixed_text(source, rules=[RULES["FSDP001"]]) == case("""\
        model = Net()

        # shard the model
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters())
        opt.step()
        """)


def test_fsdp001_moving_the_optimizer_leaves_the_blank_line_above_it_in_place():
    source = case("""\
        model = Net()

        opt = torch.optim.AdamW(model.parameters())
        loss_fn = torch.nn.MSELoss()
        fully_shard(model)
        opt.step()
        """)
    assert fixed_text(source, rules=[RULES["FSDP001"]]) == case("""\
        model = Net()

        loss_fn = torch.nn.MSELoss()
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters())
        opt.step()
        """)
