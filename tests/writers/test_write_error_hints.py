"""A write that fails says what to do for its cause: 'free space' only when space ran out (a full disk,
a quota, a file too large); a path in /proc, a read-only folder or one that vanished needs another path
(every failure said 'free space or choose another path')."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import numpy as np
import pytest

from selcal.cli.common import write_error
from selcal.writers.output import cannot_write


@pytest.mark.parametrize("code, hint", [
    (errno.ENOSPC, "free space or choose another path"), (errno.EDQUOT, "free space or choose another path"),
    (errno.EFBIG, "free space or choose another path"), (errno.ENOENT, "choose another path"),
    (errno.EACCES, "choose another path"), (errno.EROFS, "choose another path"),
])
def test_the_hint_follows_the_cause(code, hint):
    exc = OSError(code, os.strerror(code))
    assert cannot_write("out.json: ", exc) == f"out.json: cannot write ({os.strerror(code)}); {hint}"
    assert write_error(exc, "out.json") == f"out.json: cannot write ({os.strerror(code)}); {hint}"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="needs /proc")
def test_an_output_in_proc_is_not_told_to_free_space(tmp_path):
    np.savez(tmp_path / "m.npz", logits=np.random.default_rng(0).normal(size=(50, 3)), labels=np.arange(50) % 3)
    done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(tmp_path / "m.npz"), "--scores", "msp",
                           "--csv", "/proc/version", "-q"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 2
    assert done.stderr.strip().endswith("); choose another path"), done.stderr
    assert "free space" not in done.stderr
