"""Writing outputs: a file appears under its final name only when complete."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import SelcalError


@contextmanager
def atomic_write(path, mode: str = "w"):
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success.

    A failed or killed run never leaves a partial file under the final name. The file gets
    the permissions a plainly created one would (the temporary file is private, 0600).
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SelcalError(f"{path}: folder '{folder}' does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{path}: folder '{folder}' is not writable; choose another output path")
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, mode) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
