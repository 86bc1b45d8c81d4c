"""The torch, torchvision and timm side of ``selcal dump``, imported only when needed: the
extra's check, the model and its weights, the device, the transform, the image loader."""

from __future__ import annotations

import difflib
import logging
import warnings

from ...errors import SelcalError
from ...options import DEFAULT_SEED

#: What to install, in words that work from a clone of selcal (no registry serves 'selcal[timm]').
INSTALL_HINT = "pip install torch torchvision timm (or, in a clone of selcal, pip install -e '.[timm]')"


def require_stack() -> None:
    """Refuse in one line, before any work, when the optional extra is not installed."""
    import importlib.util

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            return True

    missing = [m for m in ("torch", "torchvision", "timm") if absent(m)]
    if missing:
        raise SelcalError(f"selcal dump needs torch, torchvision and timm ({', '.join(missing)} not installed): "
                          f"{INSTALL_HINT}")


def import_stack():
    modules = []
    for name in ("torch", "torchvision", "timm"):
        try:
            modules.append(__import__(name))
        except ImportError as exc:
            raise SelcalError(f"selcal dump needs torch, torchvision and timm ({name}: {exc}): {INSTALL_HINT}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a torchvision built for another torch
            reason = " ".join(str(exc).split())[:200]
            raise SelcalError(f"selcal dump: cannot import {name} ({type(exc).__name__}: {reason}); torch and "
                              f"torchvision must be matching builds: reinstall with {INSTALL_HINT}") from None
    return modules


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    return exc


def _unknown_model(timm, name: str) -> SelcalError:
    names = timm.list_models()
    close = difflib.get_close_matches(name.split(".")[0], names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return SelcalError(f"unknown timm model {name!r}{hint} (list them with: python -c \"import timm; "
                       f"print(timm.list_models('*{name.split('.')[0][:6]}*'))\")")


def load_model(timm, torch, name: str, *, pretrained: bool, checkpoint: str | None, num_classes: int | None,
               status=None, seed: int = DEFAULT_SEED):
    """The timm model in eval mode, with timm's weights (``pretrained``), a checkpoint's, or random
    ones drawn with ``seed`` (so every process, and every shard of a dump, makes the same model)."""
    if not timm.is_model(name):
        raise _unknown_model(timm, name)
    kwargs = {} if num_classes is None else {"num_classes": num_classes}
    if pretrained:
        base = name.split(".")[0]
        tags = [p for p in timm.list_pretrained() if p == name or p.split(".")[0] == base]
        if not tags or ("." in name and name not in tags):
            known = f" (known: {', '.join(tags[:4])}{', ...' if len(tags) > 4 else ''})" if tags else ""
            raise SelcalError(f"timm has no pretrained weights for {name!r}{known}; use --checkpoint PATH")
        if status is not None:
            status(f"loading pretrained weights for {name} (downloaded unless cached)")
        hub_logger = logging.getLogger("huggingface_hub")
        level = hub_logger.level
        hub_logger.setLevel(logging.ERROR)  # its retry messages would bury the one line below
        try:
            model = timm.create_model(name, pretrained=True, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure to fetch the weights
            cause = _root_cause(exc)
            reason = _one_line(cause, 200).rstrip(".")
            if cause is not exc:
                reason = f"{type(cause).__name__}: {reason}"
            raise SelcalError(f"could not download weights for {name}: {reason}; use --checkpoint PATH") from None
        finally:
            hub_logger.setLevel(level)
    else:
        try:
            with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
                torch.manual_seed(seed)
                model = timm.create_model(name, pretrained=False, **kwargs)
        except Exception as exc:  # noqa: BLE001
            raise SelcalError(f"cannot create timm model {name!r}{_kwargs_text(kwargs)}: {_one_line(exc)}") from None
        if checkpoint is not None:
            try:
                timm.models.load_checkpoint(model, checkpoint)
            except Exception as exc:  # noqa: BLE001
                hint = "" if num_classes is not None else " (for a checkpoint with another number of classes, pass --num-classes N)"
                raise SelcalError(f"{checkpoint}: cannot load into {name}: {_one_line(exc)}{hint}") from None
    return model.eval()


def _kwargs_text(kwargs: dict) -> str:
    return "".join(f" with {k}={v}" for k, v in kwargs.items())


def resolve_device(torch, device: str):
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise SelcalError(f"--device {device!r}: not a device; use cpu, cuda, cuda:1 or auto") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise SelcalError(f"--device {device}: no CUDA device is available (torch.cuda.is_available() is False); "
                          "use --device cpu")
    if resolved.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise SelcalError(f"--device {device}: MPS is not available here; use --device cpu")
    return resolved


def data_config_and_transform(timm, model):
    """timm's own evaluation preprocessing for ``model``: (data config, transform)."""
    from timm.data import create_transform

    try:
        from timm.data import resolve_model_data_config as resolve
        config = resolve(model)
    except ImportError:  # timm < 0.9
        from timm.data import resolve_data_config
        config = resolve_data_config({}, model=model)
    return config, create_transform(**config, is_training=False)


def image_dataset(torch, listing: Listing, transform):
    from PIL import Image

    class Images(torch.utils.data.Dataset):
        """Image i, preprocessed; an unreadable image gives its reason instead of a tensor."""

        def __len__(self):
            return len(listing)

        def __getitem__(self, i):
            try:
                with warnings.catch_warnings():
                    # PIL's DecompressionBombWarning (an image of more than 89 M pixels, read correctly) is
                    # silenced: it would reach stderr raw from a loader process; an image beyond twice that
                    # raises DecompressionBombError and is listed as unreadable, with its reason.
                    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                    with Image.open(listing.path(i)) as image:
                        rgb = image.convert("RGB")
                return i, transform(rgb), None
            except Exception as exc:  # noqa: BLE001 - skipped, counted and reported
                return i, None, f"{type(exc).__name__}: {_one_line(exc, 500)}"

    return Images()


def collate(torch):
    def collate(items):
        good = [(i, x) for i, x, _ in items if x is not None]
        bad = [(i, reason) for i, x, reason in items if x is None]
        rows = [i for i, _ in good]
        return rows, (torch.stack([x for _, x in good]) if good else None), bad
    return collate
