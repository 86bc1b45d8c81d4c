"""``selcal.evaluate_arrays`` on torch tensors: the numbers of the same values as numpy arrays.

Skipped without torch; CI runs it in its second virtualenv (the timm extra has torch), where
torch must be present.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import selcal

# CI's second virtualenv has torch (the timm extra) and sets SELCAL_REQUIRE_TIMM: there a
# missing torch fails instead of skipping.
torch = __import__("torch") if os.environ.get("SELCAL_REQUIRE_TIMM") else pytest.importorskip("torch")


def _arrays(n=400, k=5):
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(n, k)).astype(np.float32) * 3
    labels = np.where(rng.random(n) < 0.7, logits.argmax(axis=1), rng.integers(0, k, n))
    return logits, labels


def numbers(result) -> dict:
    return json.loads(result.to_json())


def test_float32_tensor_with_grad_equals_numpy():
    logits, labels = _arrays()
    tensor = torch.tensor(logits, requires_grad=True)
    expected = numbers(selcal.evaluate_arrays(logits, labels))
    assert numbers(selcal.evaluate_arrays(tensor * 1.0, torch.tensor(labels))) == expected  # a non-leaf with grad
    val = torch.tensor(logits[:100]), torch.tensor(labels[:100])
    assert numbers(selcal.evaluate_arrays(tensor, torch.tensor(labels), *val)) == \
        numbers(selcal.evaluate_arrays(logits, labels, logits[:100], labels[:100]))


def test_float16_and_bfloat16_are_read_exactly():
    logits, labels = _arrays()
    half = torch.tensor(logits).half()
    assert numbers(selcal.evaluate_arrays(half, torch.tensor(labels))) == \
        numbers(selcal.evaluate_arrays(half.numpy(), labels))
    brain = torch.tensor(logits).bfloat16()
    # bfloat16 -> float32 is exact: every bfloat16 is a float32 whose low 16 mantissa bits are 0.
    exact = brain.float().numpy()
    assert np.array_equal(exact.view(np.uint32) & 0xFFFF, np.zeros_like(exact, dtype=np.uint32))
    assert numbers(selcal.evaluate_arrays(brain, torch.tensor(labels))) == \
        numbers(selcal.evaluate_arrays(exact, labels))


def test_binary_logit_tensor_and_label_dtypes():
    rng = np.random.default_rng(5)
    v = rng.normal(size=300).astype(np.float32)
    labels = rng.random(300) < 0.5
    expected = numbers(selcal.evaluate_arrays(v, labels, scores="msp,max_logit"))
    assert expected["models"][0]["binary_logit"] is True
    for label_tensor in (torch.tensor(labels), torch.tensor(labels).long(), torch.tensor(labels).float()):
        assert numbers(selcal.evaluate_arrays(torch.tensor(v), label_tensor, scores="msp,max_logit")) == expected


@pytest.mark.parametrize("device", ["cpu", "cuda", "meta"])
def test_tensors_on_any_device(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    logits, labels = _arrays()
    if device == "meta":  # holds no values: refused in one line, not a torch traceback
        with pytest.raises(selcal.SelcalError, match="^logits: "):
            selcal.evaluate_arrays(torch.empty(4, 3, device="meta"), [0, 1, 2, 0])
        return
    tensor = torch.tensor(logits, device=device, requires_grad=True)
    assert numbers(selcal.evaluate_arrays(tensor, torch.tensor(labels, device=device))) == \
        numbers(selcal.evaluate_arrays(logits, labels))


def test_nan_in_a_tensor_names_the_argument_and_row():
    logits, labels = _arrays()
    logits[3, 2] = np.nan
    with pytest.raises(selcal.SelcalError, match=r"^logits: row 3 holds NaN for class 2"):
        selcal.evaluate_arrays(torch.tensor(logits), torch.tensor(labels))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64"])
def test_an_integer_tensor_is_refused_saying_to_call_float(dtype):
    # a quantised model's int8 codes: their softmax without the scale is a wrong number (was: read as float64)
    logits, labels = _arrays()
    codes = torch.tensor(np.round(np.abs(logits) * 10)).to(getattr(torch, dtype))
    with pytest.raises(selcal.SelcalError) as error:
        selcal.evaluate_arrays(codes, torch.tensor(labels))
    assert str(error.value).startswith(f"logits: holds integers ({dtype}); logits must be floats: pass logits.float() "
                                       "(quantised codes multiplied by their scale first")
