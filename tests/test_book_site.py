"""_ext/book_site.py's settings: the JupyterHub button, the header's search field, book/matplotlibrc.
Their effect on the built pages: test_site_pages.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import matplotlib

ROOT = Path(__file__).resolve().parents[1]


def _load_extension():
    spec = importlib.util.spec_from_file_location("book_site", ROOT / "_ext" / "book_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


book_site = _load_extension()


def _config(jupyterhub_url: str = "") -> SimpleNamespace:
    """The part of Sphinx's config that _config.yml's launch_buttons become."""
    return SimpleNamespace(html_theme_options={"launch_buttons": {"binderhub_url": "https://mybinder.org",
                                                                  "jupyterhub_url": jupyterhub_url}})


def test_jupyterhub_button_is_off_until_a_hub_is_named(monkeypatch):
    monkeypatch.delenv(book_site.HUB_VARIABLE, raising=False)
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == ""


def test_the_build_environment_names_the_hub(monkeypatch):
    monkeypatch.setenv(book_site.HUB_VARIABLE, "https://hub.example.org")
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == "https://hub.example.org"


def test_a_hub_in_the_config_stays_when_the_environment_names_none(monkeypatch):
    monkeypatch.delenv(book_site.HUB_VARIABLE, raising=False)
    config = _config("https://hub.example.org")
    book_site._configure_theme(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == "https://hub.example.org"


def test_the_header_gets_no_second_search_field():
    config = _config()
    book_site._configure_theme(None, config)
    assert config.html_theme_options["navbar_persistent"] == []


def test_the_build_draws_with_the_books_matplotlib_settings():
    book_rc = matplotlib.rc_params_from_file(ROOT / "book" / "matplotlibrc", use_default_template=False)
    with matplotlib.rc_context():  # restores this process's settings afterwards
        matplotlib.rcdefaults()
        assert matplotlib.rcParams["font.family"] != book_rc["font.family"]
        book_site._matplotlib_settings(SimpleNamespace(confdir=str(ROOT)), None)
        assert matplotlib.rcParams["font.family"] == book_rc["font.family"]
