"""The static list of tensor attribute names (analysis/tensor_methods.py) matches torch."""

import pytest

from flake8_graphleaf.analysis.tensor_methods import TENSOR_ATTRIBUTES


def test_every_public_tensor_attribute_is_listed():
    torch = pytest.importorskip("torch")
    missing = {n for n in dir(torch.Tensor) if not n.startswith("__")} - TENSOR_ATTRIBUTES
    assert not missing, sorted(missing)


def test_the_list_is_not_padded_with_non_tensor_methods():
    for name in ("iter_stochastic_nodes", "rsample", "log_prob", "update", "named_parameters"):
        assert name not in TENSOR_ATTRIBUTES
    for name in ("view", "detach", "masked_fill", "T", "grad_fn", "add_"):
        assert name in TENSOR_ATTRIBUTES
