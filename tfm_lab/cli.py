"""What `python -m tfm_lab.train` and `python -m tfm_lab.bench` share: bad input is one line.

A bad option value, a missing device or an unwritable folder prints ``PROG: error: …`` (what is
wrong and what to do instead) and exits with status 2, as argparse does for its own errors — but
without argparse's usage block, and never with a traceback.
"""
from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import NoReturn

import torch

__all__ = ["SettingsError", "OneLineParser", "pick_device", "check_device_name", "check_writable_folder"]


class SettingsError(ValueError):
    """A setting that cannot work (a bad value, a missing device, an unwritable folder, a
    checkpoint of another run), found before any work starts."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``PROG: error: MESSAGE`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def check_device_name(name: str) -> None:
    """Raises SettingsError unless ``name`` is "auto", "cpu", "cuda" or "cuda:N"."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise SettingsError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """"auto" (CUDA when there is one), "cpu", "cuda" (this rank's GPU) or "cuda:N".

    Raises:
        SettingsError: an unknown name, or a GPU this machine does not have.
    """
    check_device_name(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SettingsError(f"device {name} was asked for but CUDA is not available here; use --device cpu (or auto)")
    device = torch.device("cuda", local_rank) if name == "cuda" else torch.device(name)
    if device.index >= torch.cuda.device_count():
        raise SettingsError(f"there is no {device}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                            f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


def check_writable_folder(folder: Path) -> None:
    """Create ``folder`` if needed and check that a file can be written in it.

    Raises:
        SettingsError: it cannot be created or written to.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise SettingsError(f"cannot write to {folder}: {error.strerror or error}; "
                            f"choose a folder you can write to") from None
