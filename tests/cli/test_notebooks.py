"""Jupyter notebooks: code cells linted as one program (magics and shell escapes skipped), found by
directory walks, positions reported as cell and line in every format, FSDP000 for a file that is
not a notebook, the cache and worker processes as for Python files, and `--fix` that rewrites only
the edited cells' `source` and keeps every other byte of the notebook."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import cache_project
import pytest
from click.testing import CliRunner, Result
from samples import BAD, GOOD, write

from fsdp2_lint.cli import main
from fsdp2_lint.notebooks import CELL_END, MAGIC, NotebookError, read_notebook

parses = cache_project.parses  # fixture: how many files libcst parsed


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FSDP2_LINT_CACHE_DIR", raising=False)
    return tmp_path


def run(*args: str, cache: bool = False) -> Result:
    return CliRunner().invoke(main, ["check", *([] if cache else ["--no-cache"]), *args])


def code(source: str, outputs: list | None = None, **extra) -> dict:
    """A code cell as Jupyter writes it: the source as a list of lines, each but the last ending in a newline."""
    cell = {"cell_type": "code", "execution_count": 3, "id": f"c{len(source)}", "metadata": {"tags": ["x"]}}
    return {**cell, "outputs": outputs or [], "source": source.splitlines(keepends=True), **extra}


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "id": "m", "metadata": {}, "source": text.splitlines(keepends=True)}


def notebook(*cells: dict) -> dict:
    metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}
    return {"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["loss 0.25\n"]}
# FSDP001: the optimizer (cell 3, line 2) is built before the model is sharded (cell 4); IPython
# syntax all around it, none of it Python
TRAINING = notebook(
    markdown("# Training\nFSDP2 on a toy model.\n"),
    code("%pip install torch\nimport torch\nfrom torch.distributed.fsdp import fully_shard\n"),
    code(
        "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)",
        [OUTPUT],
    ),
    code("for layer in model:\n    !echo sharding\n    fully_shard(layer)\nfully_shard(model)"),
    code("%%bash\nnvidia-smi | grep MiB\n"),
    code("files = !ls\nmodel?\n%time optimizer.step()\noptimizer.step()"),
)
FINDING = (
    "train.ipynb:cell 3:2:13: FSDP001 optimizer built from parameters of `model` captured before "
    "`fully_shard` (cell 4, line 3): its step() updates the old, non-DTensor tensors and training silently does nothing"
)


def save(path: Path, document: dict, indent: int | None = 1, final_newline: bool = True, crlf: bool = False) -> str:
    text = json.dumps(document, indent=indent, ensure_ascii=False) + ("\n" if final_newline else "")
    text = text.replace("\n", "\r\n") if crlf else text  # JSON strings hold no raw newline
    write(path, text)
    return text


# --- linting ---


def test_a_misuse_across_cells_is_reported_at_its_cell_and_line(project):
    save(project / "train.ipynb", TRAINING)
    result = run("--output-format", "concise", "train.ipynb")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == FINDING
    assert result.stderr == ""


def test_the_same_code_as_a_script_gives_the_same_finding_at_the_scripts_line(project):
    """The notebook's code cells, pasted into one script without the IPython lines: one finding,
    the same, at the line the optimizer has in the script."""
    script = "\n".join(
        "".join(cell["source"])
        for cell in TRAINING["cells"]
        if cell["cell_type"] == "code" and cell is not TRAINING["cells"][4]
    )
    script = re.sub(r"(?m)^\s*(%.*|!.*|files = !ls|model\?)\n", "", script)
    write(project / "train.py", script)
    save(project / "train.ipynb", TRAINING)
    as_script = json.loads(run("--output-format", "json", "train.py").stdout)
    as_notebook = json.loads(run("--output-format", "json", "train.ipynb").stdout)
    assert [d["code"] for d in as_script] == [d["code"] for d in as_notebook] == ["FSDP001"]
    assert (as_script[0]["line"], as_script[0]["column"]) == (5, 13)
    assert (as_notebook[0]["cell"], as_notebook[0]["line"], as_notebook[0]["column"]) == (3, 2, 13)
    assert "cell" not in as_script[0]


def test_full_output_shows_the_cells_line_in_the_gutter(project):
    save(project / "train.ipynb", TRAINING)
    lines = run("train.ipynb").stdout.splitlines()
    assert lines[0] == FINDING
    assert lines[2] == "2 | optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)"


def test_json_gives_the_cell_and_lines_counted_in_it_edits_and_related_too(project):
    save(project / "train.ipynb", TRAINING)
    (found,) = json.loads(run("--output-format", "json", "train.ipynb").stdout)
    assert (found["cell"], found["line"], found["end_line"], found["end_column"]) == (3, 2, 2, 59)
    removal, insertion = found["fix"]["edits"]
    assert (removal["cell"], removal["line"], removal["column"]) == (3, 2, 1)
    assert (insertion["cell"], insertion["line"], insertion["column"]) == (4, 5, 1)  # after `fully_shard(model)`
    assert [(r["cell"], r["line"]) for r in found["related"]] == [(4, 3)]


def test_a_noqa_comment_on_the_cells_line_suppresses_it(project):
    document = json.loads(json.dumps(TRAINING))
    document["cells"][2]["source"][1] += "  # noqa: FSDP001"
    save(project / "train.ipynb", document)
    assert run("train.ipynb").stdout == "All checks passed!\n"


def test_ci_formats_name_the_cell_in_the_message(project):
    save(project / "train.ipynb", TRAINING)
    github = run("--output-format", "github", "train.ipynb").stdout
    assert ",line=2,col=13," in github and "::train.ipynb:cell 3:2:13: FSDP001 optimizer" in github
    (gitlab,) = json.loads(run("--output-format", "gitlab", "train.ipynb").stdout)
    assert gitlab["description"].startswith("FSDP001 cell 3: optimizer built")
    assert gitlab["location"]["lines"] == {"begin": 2, "end": 2}
    (sarif,) = json.loads(run("--output-format", "sarif", "train.ipynb").stdout)["runs"][0]["results"]
    assert sarif["message"]["text"].startswith("cell 3: optimizer built")
    assert sarif["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    assert sarif["relatedLocations"][0]["message"]["text"].startswith("cell 4: ")
    junit = ET.fromstring(run("--output-format", "junit", "train.ipynb").stdout)
    assert junit.find(".//failure").text.startswith("cell 3, line 2, col 13, optimizer built")


def test_ipython_syntax_is_skipped_and_a_syntax_error_is_placed_in_its_cell(project):
    """Every kind of IPython line parses as skipped (one finding, no FSDP000), the code around it as
    Python; a real syntax error is FSDP000 at its cell and line."""
    magics = notebook(
        code("%load_ext autoreload\nimport torch\nfrom torch.distributed.fsdp import fully_shard\n"),
        code(
            "model = Net()\nfor step in range(3):\n    %time torch.ones(1)\n    !nvidia-smi \\\n      --query-gpu=memory.used\n"
        ),
        code("%%writefile helper.py\ndef broken(:\n"),
        code(
            "x = %env HOME\ntorch?\n??torch.ones\nsteps = (7\n         % 2)\nopt = torch.optim.AdamW(model.parameters())\n"
            "for block in model.blocks:\n    fully_shard(block)\nfully_shard(model)\nopt.step()\n"
        ),
    )
    save(project / "magics.ipynb", magics)
    found = json.loads(run("--output-format", "json", "magics.ipynb").stdout)
    assert [(d["code"], d["cell"], d["line"], d["column"]) for d in found] == [("FSDP001", 4, 6, 7)]
    broken = notebook(
        code("from torch.distributed.fsdp import fully_shard\n"), markdown("text"), code("x = 1\ndef broken(:\n")
    )
    save(project / "broken.ipynb", broken)
    (found,) = json.loads(run("--output-format", "json", "broken.ipynb").stdout)
    assert (found["code"], found["cell"], found["line"]) == ("FSDP000", 3, 2)


def test_automagic_lines_are_skipped_and_python_spelled_alike_is_kept():
    """IPython runs `pip install x` or `ls ./data/` without the `%` (automagic): skipped as IPython
    lines, while a line that Python reads (`ls -l`, `pip = 3`, `cd in dirs`) stays code."""
    source = "pip install sagemaker awscli\nls ./embeddings/\ncd ~/data\nls -l\npip = 3\nfound = [cd in dirs]\n"
    read = read_notebook(json.dumps(notebook(code(source))).encode())
    lines = read.python.decode().splitlines()
    assert lines[:3] == [MAGIC] * 3
    assert lines[3:6] == ["ls -l", "pip = 3", "found = [cd in dirs]"]
    assert read.with_python(read.python) == read.text.encode()


def test_a_cell_indented_as_a_whole_is_read_dedented_as_ipython_runs_it(project):
    """IPython strips the first line's indentation from every line of the cell: no FSDP000, the
    finding's columns count in the cell as written, and a fix puts the indentation back."""
    indented = "    import torch\n    from torch.distributed.fsdp import fully_shard\n    !nvidia-smi\n\n"
    indented += "    model = Net()\n    opt = torch.optim.AdamW(model.parameters())\n    fully_shard(model)\n    opt.step()\n"
    save(project / "indented.ipynb", notebook(markdown("title"), code(indented)))
    found = json.loads(run("--output-format", "json", "--select", "FSDP001,FSDP000", "indented.ipynb").stdout)
    assert [(d["code"], d["cell"], d["line"], d["column"]) for d in found] == [("FSDP001", 2, 6, 11)]
    shown = run("--select", "FSDP001", "indented.ipynb").stdout
    assert "6 |     opt = torch.optim.AdamW(model.parameters())\n  |           ^^^^" in shown
    read = read_notebook((project / "indented.ipynb").read_bytes())
    assert read.python.decode().splitlines()[:3] == ["import torch", "from torch.distributed.fsdp import fully_shard", MAGIC]
    assert read.with_python(read.python) == read.text.encode()
    edited = read.with_python(read.python.replace(b"model = Net()", b"model = Net(depth=2)"))
    assert json.loads(edited)["cells"][1]["source"][4] == "    model = Net(depth=2)\n"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not a valid notebook: Expecting property name"),
        ('{"metadata": {}}', "not a valid notebook: no `cells` list at the top level"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}', "not a valid notebook: cell 1 has no text `source`"),
    ],
)
def test_a_file_that_is_not_a_notebook_is_fsdp000_for_that_file_only(project, content, reason):
    write(project / "nb" / "bad.ipynb", content)
    save(project / "nb" / "train.ipynb", TRAINING)
    found = json.loads(run("--output-format", "json", "nb").stdout)
    assert [(d["path"], d["code"]) for d in found] == [("nb/bad.ipynb", "FSDP000"), ("nb/train.ipynb", "FSDP001")]
    assert found[0]["message"].startswith(reason) and "cell" not in found[0]


def test_directory_walks_include_notebooks_but_not_checkpoints(project):
    save(project / "src" / "train.ipynb", TRAINING)
    save(project / "src" / ".ipynb_checkpoints" / "train-checkpoint.ipynb", TRAINING)
    write(project / "src" / "model.py", "x = 1\n")
    shown = run("--show-files", "src").stdout.splitlines()
    assert shown == [str(project / "src" / "model.py"), str(project / "src" / "train.ipynb")]
    result = run("--output-format", "concise", "src")
    assert result.stdout.splitlines()[0] == FINDING.replace("train.ipynb", "src/train.ipynb")
    assert result.stderr == ""


def test_standard_input_named_as_a_notebook_is_read_as_one(project):
    text = json.dumps(TRAINING)
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--output-format", "concise", "--stdin-filename", "train.ipynb", "-"], input=text
    )
    assert result.stdout.splitlines()[0] == FINDING


def test_the_cache_and_worker_processes_give_the_same_cell_positions(project, parses):
    for index in range(17):  # above the threshold at which worker processes lint
        save(project / "many" / f"n{index:02}.ipynb", TRAINING)
    serial = run("--jobs", "1", "--output-format", "json", "many")
    parallel = run("--jobs", "2", "--output-format", "json", "many")
    assert serial.stdout == parallel.stdout
    assert {(d["cell"], d["line"]) for d in json.loads(serial.stdout)} == {(3, 2)}
    parses[0] = 0
    first = run("--jobs", "1", "--output-format", "json", "many", cache=True)
    assert parses[0] == 17
    again = run("--jobs", "1", "--output-format", "json", "many", cache=True)
    assert parses[0] == 17  # answered by the cache, mapped to cells as before
    assert first.stdout == again.stdout == serial.stdout


def test_add_noqa_leaves_a_notebook_as_it_is_and_says_so(project):
    text = save(project / "train.ipynb", TRAINING)
    result = run("--add-noqa", "train.ipynb")
    assert "--add-noqa does not edit notebooks" in result.stderr
    assert (project / "train.ipynb").read_text() == text


# --- fixing ---


def _fixed(path: Path, before: str) -> str:
    result = run("--fix", "--unsafe-fixes", str(path.name))
    assert result.exit_code == 0, result.output
    return path.read_bytes().decode("utf-8")  # as it is: no newline translation


@pytest.mark.parametrize(
    ("indent", "final_newline", "crlf"), [(1, True, False), (2, False, False), (None, True, False), (2, True, True)]
)
def test_fix_changes_only_the_edited_cells_source(project, indent, final_newline, crlf):
    before = save(project / "train.ipynb", TRAINING, indent, final_newline, crlf)
    after = _fixed(project / "train.ipynb", before)
    old, new = json.loads(before), json.loads(after)
    assert (
        "".join(new["cells"][2]["source"])
        == "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))"
    )
    assert "".join(new["cells"][3]["source"]) == (
        "for layer in model:\n    !echo sharding\n    fully_shard(layer)\nfully_shard(model)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)"
    )  # the shell escape kept, the cell still without a final newline
    for index in (2, 3):
        assert new["cells"][index]["source"] != old["cells"][index]["source"]
        new["cells"][index]["source"] = old["cells"][index]["source"]
    assert new == old  # metadata, outputs, the other cells: unchanged
    # and byte for byte: the text around the two `source` values is the text it was
    pattern = r'"source": (?:\[[^\]]*\]|"(?:[^"\\]|\\.)*")'
    assert re.split(pattern, after) == re.split(pattern, before)
    assert list(new) == list(old) and list(new["cells"][2]) == list(old["cells"][2])  # key order
    assert after.endswith("}\r\n" if crlf else "}\n") is final_newline
    assert after.count("\n") - after.count("\r\n") == (0 if crlf else after.count("\n"))  # the line endings kept
    assert run("train.ipynb").stdout == "All checks passed!\n"


def test_fix_keeps_a_string_source_a_string_and_diff_writes_nothing(project):
    document = notebook(code("x = 1"), code(BAD))
    document["cells"][1]["source"] = BAD  # one string, as some tools write it
    before = save(project / "train.ipynb", document)
    diff = run("--fix", "--unsafe-fixes", "--diff", "train.ipynb")
    assert diff.stdout.splitlines()[:3] == ["--- train.ipynb:cell 2", "+++ train.ipynb:cell 2", "@@ -2,8 +2,8 @@"]
    assert "\n-opt = torch.optim.AdamW(model.parameters())\n" in diff.stdout  # the cell's code, not JSON
    assert "\n+opt = torch.optim.AdamW(model.parameters())\n opt.step()\n" in diff.stdout
    assert (project / "train.ipynb").read_text() == before  # --diff writes nothing
    after = _fixed(project / "train.ipynb", before)
    source = json.loads(after)["cells"][1]["source"]
    assert isinstance(source, str) and source.index("opt = torch.optim") > source.index("fully_shard(model)")
    assert json.loads(after)["cells"][0] == json.loads(before)["cells"][0]


def test_a_safe_fix_needs_no_option_and_touches_one_cell(project):
    document = notebook(
        code(GOOD.replace("opt.step()", "")), code("out = model.forward(batch)\n%time opt.step()", [OUTPUT])
    )
    before = save(project / "train.ipynb", document)
    result = run("--fix", "train.ipynb")
    assert (result.exit_code, result.stdout) == (0, "Found 1 problem (1 fixed, 0 remaining).\n")
    after = json.loads((project / "train.ipynb").read_text())
    assert after["cells"][1]["source"] == ["out = model(batch)\n", "%time opt.step()"]
    after["cells"][1]["source"] = json.loads(before)["cells"][1]["source"]
    assert after == json.loads(before)


def test_a_fixed_source_that_cannot_be_put_back_is_refused():
    """What --fix checks before writing: every cell marker and every IPython line still there."""
    source = read_notebook(json.dumps(notebook(code("!ls\nx = 1\n"), code("y = 2"))).encode())
    python = source.python.decode()
    assert python.count(CELL_END) == 2
    with pytest.raises(NotebookError, match="no longer splits"):
        source.with_python(python.replace(CELL_END + "\n", "", 1).encode())
    with pytest.raises(NotebookError, match="an IPython line was lost"):
        source.with_python(python.split("\n", 1)[1].encode())
    same = source.with_python(python.encode())
    assert same == source.text.encode()
    edited = json.loads(source.with_python(python.replace("y = 2", "y = 3").encode()))
    assert edited["cells"][0]["source"] == ["!ls\n", "x = 1\n"] and edited["cells"][1]["source"] == ["y = 3"]
