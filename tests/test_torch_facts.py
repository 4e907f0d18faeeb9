"""The torch semantics table (analysis/facts/semantics.json) is torch's own answer: it is
regenerated against the installed torch and must not differ; and the analysis reads what it says."""

import json
import os

import pytest

from flake8_graphleaf.analysis.facts import torch_facts

pytestmark = pytest.mark.slow  # end to end: run by `python -m pytest -m slow` and .ci/run

TABLE = os.path.join(os.path.dirname(torch_facts.__file__), "semantics.json")


@pytest.mark.torch
def test_the_table_is_what_the_installed_torch_does():
    torch = pytest.importorskip("torch")
    from flake8_graphleaf.runtime import torch_probe

    with open(TABLE, encoding="utf-8") as fh:
        stored = json.load(fh)
    generated = torch_probe.generate()
    diff = torch_probe.differences(stored, generated)
    assert not diff, (
        f"analysis/facts/semantics.json differs from torch {torch.__version__} in {len(diff)} entries "
        "(regenerate: python -m flake8_graphleaf.runtime.torch_probe --write):\n" + "\n".join(diff[:40])
    )
    # and the file is byte-for-byte what --write produces
    with open(TABLE, encoding="utf-8") as fh:
        assert fh.read() == torch_probe.dumps(generated)


@pytest.mark.torch
def test_every_public_tensor_name_is_known():
    torch = pytest.importorskip("torch")
    names = {n for n in dir(torch.Tensor) if not n.startswith("_")}
    assert names <= torch_facts.tensor_names()


def test_facts_the_rules_rely_on():
    # fresh results although the input requires grad
    for qual in ("torch.zeros_like", "torch.randn", "torch.ones"):
        assert torch_facts.function(qual, "1:T").no_history, qual
    for meth in ("new_zeros", "detach", "argmax", "eq", "size", "item", "tolist", "numpy"):
        assert torch_facts.tensor_method(meth, "1:T").no_history, meth
    # history, and whose
    assert torch_facts.tensor_method("expand_as", "1:T").sources == ("self",)
    assert set(torch_facts.function("torch.nn.functional.embedding", "2:TT").sources) == {1}
    assert torch_facts.function("torch.max", "2:Tn").items == ("carries", "int")
    assert torch_facts.function("torch.max", "2:TT").items is None
    assert torch_facts.tensor_method("max", "1:n").items == ("carries", "int")
    assert torch_facts.tensor_attribute("T") == "carries" and torch_facts.tensor_attribute("data") == "fresh"
    assert torch_facts.is_inplace("add_") and not torch_facts.is_inplace("requires_grad_")
    assert torch_facts.function("torch.nn.Parameter", "1:T").result == "leaf"
    assert torch_facts.function("torch.zeros", "1:n").makes_leaf == "keyword"
    normal = torch_facts.distribution("torch.distributions.Normal")
    assert normal["holds"] and normal["methods"]["sample"] == "fresh" and normal["methods"]["rsample"] == "carries"
    assert torch_facts.module_api("parameters") == "leaves" and torch_facts.module_api("state_dict") == "fresh"
    # x.to(x.dtype) is x itself; another dtype makes a copy with history, positional or keyword
    assert torch_facts.tensor_method("to", "1:T").alias and set(torch_facts.dtype_copies("to")) == {"positional", "keyword"}
    assert torch_facts.default_dtype() == "float32" and torch_facts.dtype_name("torch.double") == "float64"
    assert torch_facts.integral_dtype("torch.long") and torch_facts.integral_dtype("torch.bool")
    assert not torch_facts.integral_dtype("torch.float16") and not torch_facts.integral_dtype("torch.nothing")


def test_the_linter_reads_no_hand_kept_list_of_what_carries_history():
    # the lists the table replaced are gone from the analysis
    import flake8_graphleaf.analysis.facts.torch_names as names

    for gone in ("INT_DTYPES", "NON_DIFF_METHODS", "NON_DIFF_ATTRS", "NON_DIFF_TORCH", "NON_DIFF_QUALNAMES", "TENSOR_VIEW_ATTRS",
                 "SHAPE_ONLY_ARGS", "MODULE_API_LEAVES", "MODULE_API_MODULES", "MODULE_API_NONE"):
        assert not hasattr(names, gone), gone
