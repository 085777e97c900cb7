"""A file name that is not UTF-8 (legal on Linux: the OS hands Python its bytes as surrogate
escapes) is reported in every output format as valid Unicode, each undecodable byte as ``\\xNN``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from urllib.parse import unquote

import pytest

from fsdp2_lint.diagnostics import Diagnostic, Severity
from fsdp2_lint.output import FORMATS, write_report

NAMES = (os.fsdecode(b"bad\xff.py"), os.fsdecode(b"bad\xfe.py"))  # as os.listdir gives them
SHOWN = ("bad\\xff.py", "bad\\xfe.py")
DIRTY = textwrap.dedent(
    """\
    import torch
    from torch.distributed.fsdp import fully_shard

    model = Net()
    fully_shard(model)
    model.forward(x)
    """
)


def diagnostic(path: str) -> Diagnostic:
    return Diagnostic("FSDP003", "direct-forward-call", "`.forward(...)` skips FSDP's hooks", "call `model(x)`",
                      Severity.ERROR, path, 6, 1, 6, 14, "model.forward(x)")  # fmt: skip


def reported_paths(output_format: str, output: str) -> list[str]:
    """The file names a report gives, read back the way its consumers read it."""
    if output_format in ("text", "concise", "github"):
        return [name for name in SHOWN if name in output]
    if output_format == "json":
        return [d["path"] for d in json.loads(output)]
    if output_format == "json-lines":
        return [json.loads(line)["path"] for line in output.splitlines()]
    if output_format == "gitlab":
        return [d["location"]["path"] for d in json.loads(output)]
    if output_format == "junit":
        return [suite.get("name") for suite in ET.fromstring(output)]
    assert output_format == "sarif"
    results = json.loads(output)["runs"][0]["results"]
    return [unquote(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results]


@pytest.mark.parametrize("output_format", FORMATS)
def test_every_format_writes_a_name_that_is_not_utf8_as_valid_unicode(output_format, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()
    write_report([diagnostic(name) for name in NAMES], output_format, stream)
    output = stream.getvalue()
    output.encode("utf-8")  # strict: a lone surrogate would raise here, as it does on a strict stdout
    assert reported_paths(output_format, output) == list(SHOWN)


@pytest.mark.parametrize("output_format", ["gitlab", "sarif"])
def test_names_that_differ_only_in_undecodable_bytes_keep_distinct_fingerprints(output_format, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()
    write_report([diagnostic(name) for name in NAMES], output_format, stream)
    report = json.loads(stream.getvalue())
    if output_format == "gitlab":
        fingerprints = [d["fingerprint"] for d in report]
    else:
        fingerprints = [r["partialFingerprints"]["fsdp2-lint/v1"] for r in report["runs"][0]["results"]]
    assert len(set(fingerprints)) == 2


def lint_strictly(directory, *options: str) -> str:
    """Standard output of a run over ``directory`` whose stdout refuses anything but UTF-8."""
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", *options, "."]
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}  # what a UTF-8 locale gives
    done = subprocess.run(command, cwd=directory, capture_output=True, env=environment)
    assert done.returncode == 1, done.stderr.decode(errors="replace")[-3000:]
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("output_format", ["text", "sarif"])
def test_a_file_whose_name_is_not_utf8_is_reported_on_a_strict_stdout(output_format, tmp_path):
    (tmp_path / NAMES[0]).write_text(DIRTY)
    output = lint_strictly(tmp_path, "--output-format", output_format)
    assert reported_paths(output_format, output) == [SHOWN[0]]


def test_its_diff_names_it_on_a_strict_stdout(tmp_path):
    (tmp_path / NAMES[0]).write_text(DIRTY)
    headers = [line for line in lint_strictly(tmp_path, "--diff").splitlines() if line.startswith(("---", "+++"))]
    assert len(headers) == 2 and all(SHOWN[0] in line for line in headers)
