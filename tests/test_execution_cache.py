"""_ext/execution_cache.py: a page cached against older tfm_ref files or an older catalogue is executed
again, because the cache it is looked up in is named by them."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import execution_cache


def _cache_for(monkeypatch, cache: Path, code: str, catalogue: str) -> Path:
    """Where the build looks its pages up, with tfm_ref's files and the catalogue fingerprinted as given."""
    monkeypatch.setattr(execution_cache, "code_fingerprint", lambda: code)
    monkeypatch.setattr(execution_cache, "fingerprint", lambda app: catalogue)
    config = SimpleNamespace(nb_execution_cache_path=str(cache))
    execution_cache._key(None, config)
    return Path(config.nb_execution_cache_path)


def test_the_same_inputs_find_their_earlier_executions(tmp_path, monkeypatch):
    first = _cache_for(monkeypatch, tmp_path, "tfm_ref v1", "")
    (first / "global.db").parent.mkdir(parents=True)
    (first / "global.db").write_text("executions")
    assert _cache_for(monkeypatch, tmp_path, "tfm_ref v1", "") == first
    assert (first / "global.db").read_text() == "executions"


def test_changed_tfm_ref_files_or_catalogue_give_a_new_cache_and_drop_the_old(tmp_path, monkeypatch):
    first = _cache_for(monkeypatch, tmp_path, "tfm_ref v1", "catalogue v1")
    first.mkdir(parents=True)
    recorded_again = _cache_for(monkeypatch, tmp_path, "tfm_ref v2", "catalogue v1")
    assert recorded_again != first and not first.exists()
    recorded_again.mkdir()
    translated_again = _cache_for(monkeypatch, tmp_path, "tfm_ref v2", "catalogue v2")
    assert translated_again not in (first, recorded_again) and not recorded_again.exists()


def test_a_cache_from_before_it_was_keyed_is_removed(tmp_path, monkeypatch):
    (tmp_path / "executed").mkdir()
    (tmp_path / "global.db").write_text("unkeyed executions")
    keyed = _cache_for(monkeypatch, tmp_path, "tfm_ref v1", "")
    assert list(tmp_path.iterdir()) == [] and keyed.parent == tmp_path
