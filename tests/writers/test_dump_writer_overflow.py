"""A logit beyond the dump's type's range (1e6 into a float16 dump) is refused in one line, with no
numpy RuntimeWarning ("overflow encountered in cast") printed before it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import selcal
from selcal.errors import SelcalError


@pytest.mark.parametrize("dtype", [None, "float16"])
def test_a_logit_beyond_the_dumps_type_is_refused_without_a_numpy_warning(tmp_path, dtype):
    writer = selcal.DumpWriter(tmp_path / "dump", split="test", dtype=dtype)
    writer.add(np.zeros((2, 3), np.float16), [0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SelcalError, match="batch 2: float64 logits would change as float16"):
            writer.add(np.full((2, 3), 1e6), [0, 1])
