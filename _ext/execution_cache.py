"""The pages' execution cache: one per version of what the pages run against besides their own code.

jupyter-cache knows a page by the code of its cells. The pages also run tfm_ref — its code, the results
it recorded (``tfm_lab/results/*.json``), its checkpoints — under the installed PyTorch and matplotlib,
and a translated edition draws its figures' words from its catalogue (_ext/figure_texts.py). A page
cached against older ones would show outdated outputs: a result recorded again, a bug fixed in tfm_ref.
So each edition keeps its executions in a folder named by a hash of those inputs
(``inputs-<fingerprint>`` in the cache it is given), and drops the folders of older inputs.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from figure_texts import fingerprint
from tfm_widgets.static import code_fingerprint

__all__ = ["keyed_cache", "setup"]

PREFIX = "inputs-"


def keyed_cache(cache: Path, inputs: str) -> Path:
    """The folder of ``cache`` for the pages executed against ``inputs`` (a fingerprint); everything
    else in ``cache`` is removed (the folders of older inputs, or a cache from before it was keyed)."""
    keyed = cache / f"{PREFIX}{hashlib.sha256(inputs.encode()).hexdigest()[:16]}"
    if cache.is_dir():
        for entry in cache.iterdir():
            if entry != keyed:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return keyed


def _key(app, config) -> None:
    cache = Path(config.nb_execution_cache_path)
    config.nb_execution_cache_path = str(keyed_cache(cache, code_fingerprint() + fingerprint(app)))


def setup(app):
    app.setup_extension("figure_texts")  # the catalogue's fingerprint, compiled first
    app.connect("config-inited", _key, priority=600)  # after figure_texts has set the edition up
    return {"parallel_read_safe": True, "parallel_write_safe": True}
