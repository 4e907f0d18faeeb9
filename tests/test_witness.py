"""Every finding under a default code carries its witness -- the grad source, each step to the
store, how the storing code is reached, why the value is kept, what deepcopy copies -- in the
JSON and SARIF outputs and under ``graphleaf check --show-witness``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cli import FIXTURES, run

DEFAULT_CODES = {"GLF001", "GLF002", "GLF003", "GLF004", "GLF005", "GLF101", "GLF102", "GLF103", "GLF201", "GLF202",
                 "GLF301"}
KEYS = {"source", "source_kind", "steps", "reached", "grad", "kept", "copied"}
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

CHAIN = '''\
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Linear(4, 4)

    def forward(self, x):
        h = self.conv(x)
        g = h.relu() * 2
        self._keep(g)
        return g

    def _keep(self, value):
        scaled = value.mean(0)
        self.summary = scaled
'''


def _json(*paths, cwd=None):
    r = run("check", "--no-cache", "--output-format", "json", "--exit-zero", *paths, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_every_default_finding_of_the_fixtures_has_a_witness():
    items = _json(FIXTURES / "lint", FIXTURES / "models", FIXTURES / "incidents", FIXTURES / "example",
                  FIXTURES / "projects")
    reported = [i for i in items if i["code"] in DEFAULT_CODES]
    assert len(reported) > 50
    for item in reported:
        w = item["witness"]
        assert w is not None and KEYS <= set(w), item
        assert w["steps"] and all(isinstance(line, int) and code for line, code in w["steps"]), item
        assert w["source"] and w["reached"] and w["copied"], item
        if item["code"] != "GLF202":  # a copy site's chain ends at the copy, after the store
            assert w["steps"][-1][0] == item["location"]["row"], item


def test_the_chain_names_each_step_across_methods(tmp_path):
    (tmp_path / "enc.py").write_text(CHAIN)
    (item,) = _json("enc.py", cwd=tmp_path)
    w = item["witness"]
    assert item["code"] == "GLF001" and item["location"]["row"] == 17
    assert w["source_kind"] == "submodule" and w["source"].startswith("self.conv(...)")
    assert [line for line, _ in w["steps"]] == [10, 11, 16, 17]
    assert w["steps"][1][1] == "g = h.relu() * 2"
    assert w["reached"] == "forward -> self._keep()"
    assert w["grad"] == "enabled"
    assert w["copied"] == "copy.deepcopy(model) copies self.__dict__['summary']"
    assert "self.conv(...)" in item["message"]  # the one-line message names the source


def test_show_witness_prints_it_under_the_finding(tmp_path):
    (tmp_path / "enc.py").write_text(CHAIN)
    r = run("check", "--no-cache", "--show-witness", "enc.py", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("enc.py:17:9: GLF001")
    assert lines[1].strip().startswith("source:  self.conv(...)")
    assert "11: g = h.relu() * 2" in r.stdout
    assert "reached: forward -> self._keep(); grad enabled" in r.stdout
    plain = run("check", "--no-cache", "enc.py", cwd=tmp_path)
    assert "source:" not in plain.stdout and "reached:" not in plain.stdout


def test_an_argument_kept_as_activation_says_why(tmp_path):
    (tmp_path / "m.py").write_text('''\
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, feats):
        self.last = feats * 2
        return self.fc(feats)
''')
    assert _json("m.py", cwd=tmp_path) == []  # an argument taken for an activation: not proven
    (item,) = _json("m.py", "--confidence", "medium", cwd=tmp_path)
    assert item["code"] == "GLF001" and item["confidence"] == "medium"
    assert "feeds into a learnable computation" in item["witness"]["source"]
    assert "argument 'feats' is taken to be an activation" in item["witness"]["assumed"]


def test_sarif_carries_the_witness_as_a_code_flow(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    (tmp_path / "enc.py").write_text(CHAIN)
    r = run("check", "--no-cache", "--output-format", "sarif", "enc.py", cwd=tmp_path)
    doc = json.loads(r.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    (res,) = doc["runs"][0]["results"]
    assert res["properties"]["witness"]["reached"] == "forward -> self._keep()"
    flow = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [loc["location"]["physicalLocation"]["region"]["startLine"] for loc in flow] == [10, 11, 16, 17]


def test_the_cache_keeps_the_witness(tmp_path):
    (tmp_path / "enc.py").write_text(CHAIN)
    first = run("check", "--output-format", "json", "--cache-dir", tmp_path / "c", "enc.py", cwd=tmp_path)
    again = run("check", "--output-format", "json", "--cache-dir", tmp_path / "c", "enc.py", cwd=tmp_path)
    assert json.loads(first.stdout)[0]["witness"] == json.loads(again.stdout)[0]["witness"] is not None


def test_each_step_names_its_own_file_where_the_chain_crosses_files(tmp_path):
    """The copy graph's chain runs through a script and a package: each step is labelled with
    the file it is in (a step of the script is not the store's file)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "keeper.py").write_text('''\
class Keeper:
    def __init__(self):
        self.last = None

    def keep(self, value):
        self.last = value
''')
    (tmp_path / "train.py").write_text('''\
import copy

import torch

from pkg.keeper import Keeper


def main():
    model = torch.nn.Linear(2, 2)
    keeper = Keeper()
    feats = model(torch.randn(3, 2))
    keeper.keep(feats)
    copy.deepcopy(keeper)


main()
''')
    found = {(f["filename"].replace("\\\\", "/").split("/")[-1], f["code"]): f for f in _json(".", cwd=tmp_path)}
    store = found[("keeper.py", "GLF001")]["witness"]["steps"]
    assert store[0] == [11, "train.py: feats = model(torch.randn(3, 2))"], store
    assert store[-1] == [6, "self.last = value"], store
    copy_site = found[("train.py", "GLF202")]["witness"]["steps"]
    assert copy_site[0] == [11, "feats = model(torch.randn(3, 2))"], copy_site
    assert [6, "pkg/keeper.py: self.last = value"] in copy_site, copy_site
    sarif = json.loads(run("check", "--no-cache", "--output-format", "sarif", "--exit-zero", ".", cwd=tmp_path).stdout)
    flows = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r["codeFlows"][0]["threadFlows"][0]["locations"]
             for r in sarif["runs"][0]["results"] if r["ruleId"] == "GLF001"}
    (steps,) = flows.values()
    assert [s["location"]["physicalLocation"]["artifactLocation"]["uri"] for s in steps] == [
        "train.py", "pkg/keeper.py"], steps  # each step in its own file
