"""Writing outputs: every file of a run appears under its final name together, and only when complete.

:class:`Outputs` is the output transaction of one run (``evaluate``, ``check``, ``compare``, the
figures and the HTML report). Each output path is classified once (:func:`classify`):

* a regular file, a missing one, or a symlink to either: the content is *staged* in a hidden
  temporary file beside the real target (``.NAME.XXXX.tmp``) and renamed onto it at commit;
  a symlink stays a symlink, its target is replaced;
* a character device (``/dev/null``, a terminal) or a FIFO, also through a symlink: the content
  is written *through* at commit by opening the existing node for writing (never created,
  never truncated, never renamed over);
* ``-``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: written to that
  open descriptor of this process at commit, where a plain ``print`` would go;
* anything else (a folder, a block device, a socket, an input file) is refused with one line
  before any work.

At commit the streams are written first (they can fail, and cannot be taken back), then every
staged file is renamed onto its target with SIGINT and SIGTERM held back (renames take
microseconds: a signal then acts after the last one). Any failure, or a signal before that
point, removes every temporary file and every folder the transaction created.
"""

from __future__ import annotations

import errno
import io
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..errors import SelcalError

_Self = TypeVar("_Self", bound="AllOrNothing")

__all__ = ["Outputs", "Target", "classify", "input_identities", "atomic_write", "signals_held"]

STDOUT = "-"
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/%d/fd)/(\d+)$" % os.getpid())
_NAMED_FDS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None)


@dataclass
class Target:
    """Where one output goes.

    ``kind`` is ``"file"`` (staged beside ``real`` and renamed onto it), ``"node"`` (an existing
    character device or FIFO at ``real``, written through) or ``"fd"`` (the open descriptor
    ``fd``). ``shown`` is the path as the user gave it, for messages.
    """

    shown: str
    kind: str
    real: str | None = None
    fd: int | None = None
    temp: str | None = field(default=None, repr=False)
    data: bytes | str | None = field(default=None, repr=False)

    @property
    def is_stdout(self) -> bool:
        return self.kind == "fd" and self.fd == 1


def _identity(path: str):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


class InputFiles(dict):
    """``{(device, inode): name}`` of the input files, and ``folders``: ``{real path: name}`` of the
    input folders (a folder of parts or of images: whatever is written inside would be read as
    part of the input next time)."""

    def __init__(self):
        super().__init__()
        self.folders: dict[str, str] = {}


def input_identities(paths) -> dict:
    """``{(device, inode): name}`` of every input file: a file itself, each file under a folder
    (parts, segmentation images), each match of a glob, the labels file beside a ``.npy``/``.pt``
    of logits (``test_labels.npy``). Missing inputs are left out (their
    reader refuses them)."""
    import glob

    found = InputFiles()
    for name in paths:
        if name is None or str(name) == STDOUT:
            continue
        name = str(name)
        if os.path.isdir(name):
            found.folders[os.path.realpath(name)] = name
            files = (os.path.join(root, f) for root, _, names in os.walk(name) for f in names)
        elif not os.path.exists(name) and set("*?[") & set(os.path.basename(name.rstrip("/"))):
            files = glob.glob(name, recursive=True)
        else:
            files = [name]
            if name.lower().endswith((".npy", ".pt", ".pth")):  # and the labels file read beside it
                from ..io.arrays import sibling_labels
                files += [sibling_labels(name)] if sibling_labels(name) else []
        for file in files:
            identity = _identity(file)
            if identity is not None:
                found.setdefault(identity, file)
    return found


def _fd_of(path: str) -> int | None:
    if path == STDOUT:
        return 1
    if path in _NAMED_FDS:
        return _NAMED_FDS[path]
    match = _FD_PATH.match(path)
    return int(match.group(1)) if match else None


def _existing_ancestor(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def classify(path, *, inputs=(), make_parents: bool = False) -> Target:
    """The :class:`Target` of an output ``path``; :class:`SelcalError` (one line) if it must not be written.

    ``inputs`` are the run's input paths (or their :func:`input_identities`): a path that is one
    of their files (through symlinks, ``./``, hard links: the same inode) is refused. ``make_parents``: a missing parent folder will be
    created (checked here: its nearest existing ancestor must be a writable folder).

    >>> classify("-").kind, classify("/dev/stdout").fd
    ('fd', 1)
    """
    shown = str(path)
    fd = _fd_of(shown)
    if fd is not None:
        try:
            os.fstat(fd)
        except OSError:
            raise SelcalError(f"{shown}: descriptor {fd} is not open; choose another output path") from None
        if fd == 0:
            raise SelcalError(f"{shown}: is standard input; choose another output path")
        return Target(shown, "fd", fd=fd)
    if not shown:
        raise SelcalError("an output path is empty; give a file name")
    real = os.path.realpath(shown)  # through every symlink (of the file and of its folders)
    identity = _identity(real)
    if identity is not None:
        inputs = inputs if isinstance(inputs, dict) else input_identities(inputs)
        if identity in inputs:
            name = inputs[identity]
            which = "an input of this run" if name == shown else f"the input file {name}"
            raise SelcalError(f"{shown}: is {which}; selcal never overwrites an input, choose another output path")
    folders = getattr(inputs, "folders", None) if isinstance(inputs, dict) else input_identities(inputs).folders
    for folder, name in (folders or {}).items():
        if real.startswith(folder.rstrip(os.sep) + os.sep):
            raise SelcalError(f"{shown}: is inside the input folder {name}, whose files are read as the input; "
                              "choose an output path outside it")
    try:
        mode = os.stat(real).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise SelcalError(f"{shown}: cannot be checked ({exc.strerror or exc}); choose another output path") from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise SelcalError(f"{shown}: is a folder; give a file name for the output")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            if not os.access(real, os.W_OK):
                raise SelcalError(f"{shown}: is not writable; choose another output path")
            return Target(shown, "node", real=real)
        what = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise SelcalError(f"{shown}: is {what}; selcal writes files, character devices and FIFOs only")
    folder = Path(real).parent
    shown_folder = os.path.dirname(shown) or "."
    if os.path.realpath(shown_folder) != str(folder):  # a symlink that points elsewhere: name where
        shown_folder = str(folder)
    if not folder.is_dir():
        if not make_parents:
            raise SelcalError(f"{shown}: folder '{shown_folder}' does not exist; create it first")
        ancestor = _existing_ancestor(folder)
        if not ancestor.is_dir():
            raise SelcalError(f"{shown}: '{ancestor}' is a file, not a folder; choose another output path")
        folder = ancestor
    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{shown}: folder '{shown_folder}' is not writable; choose another output path")
    return Target(shown, "file", real=real)


# ------------------------------------------------------------------ staging files
# A staged output is the hidden file ``.NAME.selcal-PID-HOST.XXXXXXXX.tmp`` beside NAME: PID is the
# writing process and HOST a short hash of its machine's name (a folder may be shared over NFS).
# A run that stages NAME removes the staging files of NAME left by a selcal process of this
# machine that is gone (killed with SIGKILL, or its machine rebooted): those files and no other.
_HOST = format(zlib.crc32(socket.gethostname().encode("utf-8", "surrogateescape")), "08x")
_NAME_BYTES = 160  # of NAME in the staging name: the whole name stays within a file system's 255 bytes


def staging_prefix(real: str, pid: int | None = None) -> str:
    """The name of a staging file of ``real`` up to its random part (see :func:`remove_stale_staging`)."""
    base = os.path.basename(real)
    encoded = os.fsencode(base)
    if len(encoded) > _NAME_BYTES:  # a very long name is cut in the staging name (bytes, whole characters)
        base = os.fsdecode(encoded[:_NAME_BYTES].decode("utf-8", "ignore").encode("utf-8"))
    return f".{base}.selcal-{os.getpid() if pid is None else pid}-{_HOST}."


_STAGING = re.compile(r"selcal-(\d+)-([0-9a-f]{8})\.[A-Za-z0-9_]{8}\.tmp", re.ASCII)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    return True


def remove_stale_staging(real: str) -> list[str]:
    """Remove the staging files of the output ``real`` that a dead selcal process of this machine
    left (a SIGKILL gives no chance to clean up); returns their paths.

    Only regular files (not symlinks) owned by this user whose name is exactly a staging name of
    ``real`` (:func:`staging_prefix`), written on this machine by a process that no longer exists,
    are removed; anything else in the folder is left alone.
    """
    folder, prefix = os.path.dirname(real) or ".", staging_prefix(real, 0)
    stem = prefix[:-len("selcal-0-" + _HOST + ".")]
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(stem):
            continue
        found = _STAGING.fullmatch(entry.name[len(stem):])
        if not found or found.group(2) != _HOST or _alive(int(found.group(1))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                os.unlink(entry.path)
                removed.append(entry.path)
        except OSError:
            continue
    return removed


def cannot_write(shown: str, exc: OSError) -> str:
    """``PATH: cannot write (why); what to do``: free space only when space ran out (a path in /proc,
    a read-only folder or a vanished one need another path, not space)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return f"{shown}cannot write ({exc.strerror or exc}); {'free space or ' if full else ''}choose another path"


def _cannot_write(shown: str, exc: OSError) -> SelcalError:
    if isinstance(exc, BrokenPipeError):
        return SelcalError(f"{shown}: the reader closed the pipe before the output was complete ({exc.strerror}); "
                           "let the reader read to the end")
    return SelcalError(cannot_write(f"{shown}: ", exc))


@contextmanager
def signals_held():
    """SIGINT and SIGTERM wait until the block ends (a few renames or unlinks must not be cut).

    Deferred in Python, not with a signal mask: a mask holds only this thread, and a signal sent
    to the process may land on any of the reading libraries' threads, its Python handler then
    running here at once. A signal that arrives meanwhile is raised again at the end, for the
    handler in place before. Only the main thread may change handlers; elsewhere nothing waits.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for signum in _SIGNALS:
        handler = signal.getsignal(signum)
        if handler is not None:  # (None: a handler installed outside Python, left alone)
            previous[signum] = handler
            signal.signal(signum, lambda number, frame: pending.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])


class AllOrNothing:
    """A ``with`` block over what is written all or not at all: what was written is kept
    (``_keep``) when the block ends normally, and dropped (``_drop``) when it raises (an error,
    Ctrl-C)."""

    def _keep(self) -> object:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self._keep()
        else:
            self._drop()


class Outputs(AllOrNothing):
    """The output transaction of one run: outputs staged while the run goes, committed together.

    Check every output path with :meth:`check` before the work (refusals are one line and cost
    nothing), stage each output with :meth:`write` once it is computed, then :meth:`commit`.
    Used as a context manager, it commits when the block ends normally and discards everything
    (temporary files, folders it created) when it ends with any exception, a signal included.

    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> with Outputs() as outputs:
    ...     _ = outputs.write(os.path.join(folder, "a.txt"), "A")
    ...     _ = outputs.write(os.path.join(folder, "b.txt"), "B")
    ...     print([name for name in os.listdir(folder) if not name.startswith(".")])  # staged, hidden
    []
    >>> sorted(os.listdir(folder))
    ['a.txt', 'b.txt']
    """

    def __init__(self, inputs=()):
        self.inputs = input_identities(inputs)
        self.staged: list[Target] = []
        self.created: list[Path] = []  # folders made by this transaction, outermost first
        self._claimed: dict = {}  # identity of each target -> the path that claimed it

    # ------------------------------------------------------------------ before the work
    def check(self, path, *, make_parents: bool = False) -> Target | None:
        """Refuse a path that must not be written (``None`` passes): before any work is done."""
        if path is None:
            return None
        target = classify(path, inputs=self.inputs, make_parents=make_parents)
        self._claim(target)
        return target

    def check_folder(self, folder, suffix: str) -> None:
        """Refuse a figure folder that is a file, cannot be created, or holds an input as ``*suffix``.

        The figures are written as ``folder/NAME{suffix}`` with names known only after the
        work: any existing ``*suffix`` entry of ``folder`` that is an input is refused now.
        """
        if folder is None:
            return
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise SelcalError(f"{folder}: is a file; --plots takes a folder (created if missing)")
        ancestor = _existing_ancestor(folder)
        if not ancestor.is_dir():
            raise SelcalError(f"{folder}: '{ancestor}' is a file, not a folder; choose another folder")
        if not os.access(ancestor, os.W_OK):
            raise SelcalError(f"{folder}: folder '{ancestor}' is not writable; choose another folder")
        if folder.is_dir():
            for entry in sorted(os.listdir(folder)):
                identity = _identity(str(folder / entry)) if entry.endswith(suffix) else None
                if identity in self.inputs:
                    raise SelcalError(f"{folder / entry}: is the input file {self.inputs[identity]}; selcal never "
                                      "overwrites an input, choose another folder")

    def _claim(self, target: Target) -> None:
        key = ("fd", target.fd) if target.kind == "fd" else (_identity(target.real) or target.real)
        if key in self._claimed and key != ("fd", 1):
            if target.kind == "node":  # /dev/null twice is fine: a stream takes any number of writes
                return
            raise SelcalError(f"{target.shown}: is also the output {self._claimed[key]}; give each output its own path")
        self._claimed.setdefault(key, target.shown)

    # ------------------------------------------------------------------ staging
    def folder(self, folder) -> Path:
        """Create ``folder`` (and missing parents) now, remembered so that a discard removes it."""
        folder = Path(folder)
        missing = []
        probe = folder
        while not probe.exists() and probe != probe.parent:
            missing.append(probe)
            probe = probe.parent
        for made in reversed(missing):
            try:
                made.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                raise SelcalError(f"{folder}: cannot create the folder ({exc.strerror or exc}); "
                                  "choose another path") from None
            self.created.append(made)
        if not folder.is_dir():
            raise SelcalError(f"{folder}: is a file, not a folder; choose another path")
        return folder

    def write(self, path, data: bytes | str, *, make_parents: bool = False) -> Target:
        """Stage ``data`` for ``path``: a complete hidden file beside a file target, kept for a stream.

        Nothing appears under ``path`` before :meth:`commit`. A failure (a full disk) is one
        :class:`SelcalError` naming ``path``; the other staged outputs stay staged until the
        caller discards them (the context manager does).
        """
        with self.open(path, "w" if isinstance(data, str) else "wb", make_parents=make_parents) as out:
            out.write(data)
        return self.staged[-1]

    @contextmanager
    def open(self, path, mode: str = "wb", *, make_parents: bool = False):
        """Stage the output ``path`` as a file object (``mode`` ``"w"``: UTF-8 text, ``"wb"``: bytes).

        A file target is written straight into its hidden temporary file (memory stays flat
        for a large output); a stream target is kept in memory until :meth:`commit`.
        """
        if make_parents and str(path) != STDOUT:
            real_parent = Path(os.path.realpath(str(path))).parent
            if not real_parent.exists():
                self.folder(real_parent)
        target = classify(path, inputs=self.inputs)
        if target.kind == "file" and any(t.kind == "file" and t.real == target.real for t in self.staged):
            raise SelcalError(f"{target.shown}: is written twice in one run; give each output its own path")
        if target.kind != "file":
            buffer = io.BytesIO() if "b" in mode else io.StringIO()
            yield buffer
            target.data = buffer.getvalue()
            self.staged.append(target)
            return
        folder = os.path.dirname(target.real)
        try:
            previous = os.stat(target.real).st_mode & 0o7777  # a replaced file keeps its permissions
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            previous = 0o666 & ~umask
        remove_stale_staging(target.real)
        with signals_held():  # a signal between creating the file and recording it would leave it behind
            try:
                handle, target.temp = tempfile.mkstemp(prefix=staging_prefix(target.real), suffix=".tmp",
                                                       dir=folder)
            except OSError as exc:
                raise _cannot_write(target.shown, exc) from None
            self.staged.append(target)
        try:
            with os.fdopen(handle, mode, **({} if "b" in mode else {"encoding": "utf-8", "errors": "backslashreplace"})) as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
            os.chmod(target.temp, previous)
        except OSError as exc:
            raise _cannot_write(target.shown, exc) from None

    # ------------------------------------------------------------------ the end
    def commit(self) -> None:
        """Write the streams, then rename every staged file onto its target; discard all on failure."""
        try:
            for target in self.staged:
                if target.kind != "file":
                    self._write_stream(target)
            with signals_held():
                for target in self.staged:
                    if target.kind == "file":
                        try:
                            os.replace(target.temp, target.real)
                        except OSError as exc:
                            raise _cannot_write(target.shown, exc) from None
                        target.temp = None
            self._sync_folders()
        except BaseException:
            self.discard()
            raise
        self.staged, self.created = [], []

    def discard(self) -> None:
        """Remove every temporary file and every (still empty) folder this transaction made."""
        with signals_held():
            for target in self.staged:
                if target.temp is not None:
                    try:
                        os.unlink(target.temp)
                    except OSError:
                        pass
                    target.temp = None
            for folder in reversed(self.created):
                try:
                    folder.rmdir()
                except OSError:
                    pass
        self.staged, self.created = [], []

    _keep, _drop = commit, discard  # (AllOrNothing: the end of a with block)

    @staticmethod
    def _write_stream(target: Target) -> None:
        data = target.data
        try:
            if target.fd in (1, 2):
                stream = sys.stdout if target.fd == 1 else sys.stderr
                if isinstance(data, str):  # (a lone surrogate, of a name that is not UTF-8, as an escape)
                    stream.write(data.encode("utf-8", "backslashreplace").decode("utf-8"))
                else:
                    stream.flush()
                    getattr(stream, "buffer", stream).write(data)
                stream.flush()
                return
            payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
            if target.kind == "fd":
                _write_all(target.fd, payload)
                return
            # The node is opened as it is: no O_CREAT, no O_TRUNC; a FIFO waits here for its reader.
            fd = os.open(target.real, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
            try:
                mode = os.fstat(fd).st_mode
                if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # replaced since it was checked
                    raise SelcalError(f"{target.shown}: changed while selcal ran (no longer a device or FIFO); "
                                      "nothing written, run again")
                _write_all(fd, payload)
            finally:
                os.close(fd)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) and target.fd in (1, 2):  # no second complaint at exit
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, target.fd)
                os.close(devnull)
            raise _cannot_write(target.shown, exc) from None

    def _sync_folders(self) -> None:
        """Make the renames durable (best effort: not every file system can fsync a folder)."""
        for folder in {os.path.dirname(t.real) for t in self.staged if t.kind == "file"}:
            try:
                fd = os.open(folder, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            except OSError:
                pass
            finally:
                os.close(fd)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]


@contextmanager
def atomic_write(path, mode: str = "w", *, inputs=()):
    """One output as a file object, in place when complete (an :class:`Outputs` of one file).

    A failed or killed run never leaves a partial file under the final name; a device, FIFO
    or symlink is written through, never replaced by a regular file.
    """
    with Outputs(inputs) as outputs:
        outputs.check(path)
        with outputs.open(path, mode) as out:
            yield out
