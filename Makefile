# Everything a fresh machine needs, in two commands: `make book` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
STAMP := $(VENV)/.installed
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT_INSTALL = $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q

.PHONY: setup sysdeps fonts release book book-strict i18n-update i18n-coverage test test-fast clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -r requirements.txt
	install -D -m 644 autograde/jupyter_server_config.d/autograde.json $(VENV)/etc/jupyter/jupyter_server_config.d/autograde.json
	touch $(STAMP)

setup: $(STAMP)

# Browser tests need Chromium and its driver; the grading sandbox needs bubblewrap; the gradebook test a
# PostgreSQL server (Debian keeps pg_ctl off the PATH, in /usr/lib/postgresql/<version>/bin); the JupyterHub
# test Node's npm, for the hub's proxy.
sysdeps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v bwrap >/dev/null || \
	  { $(APT_INSTALL) chromium chromium-driver bubblewrap; }
	@command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { $(APT_INSTALL) postgresql; }
	@command -v npm >/dev/null || { $(APT_INSTALL) nodejs npm; }

# JupyterHub's proxy, an npm package, installed into the venv: its bin/ is on the hub's PATH.
PROXY := $(BIN)/configurable-http-proxy
$(PROXY): | $(STAMP) sysdeps
	npm install --global --quiet --prefix $(VENV) configurable-http-proxy@4.6.3

# Chinese text in the book's figures needs a CJK font: book/matplotlibrc names Noto Sans CJK SC, from
# Debian's fonts-noto-cjk. Matplotlib keeps a cached list of the system's fonts: drop it after installing.
CJK_FONT_FOUND = $(BIN)/python -c "import sys; from matplotlib import font_manager as fm; \
	sys.exit(all(font.name != 'Noto Sans CJK SC' for font in fm.fontManager.ttflist))"
fonts: setup
	@$(CJK_FONT_FOUND) || { \
	  { dpkg -s fonts-noto-cjk >/dev/null 2>&1 || { $(APT_INSTALL) fonts-noto-cjk; }; } && \
	  rm -f "$$($(BIN)/python -c 'import matplotlib; print(matplotlib.get_cachedir())')"/fontlist-*.json && \
	  $(CJK_FONT_FOUND); }

# The chapters link to the student notebooks, so they are generated first.
release: setup
	$(BIN)/python -m autograde release

# Every edition of the book (_config.yml's book_editions): English in _build/html, Chinese in _build/html/zh.
book: release fonts
	$(BIN)/python locales/build.py

book-strict: release fonts
	$(BIN)/python locales/build.py --strict

# The Chinese edition's catalogues (docs/chinese-edition.md): extract the English messages, update
# locales/zh_CN/LC_MESSAGES/*.po (changed paragraphs become fuzzy), show what is left to translate.
i18n-update: release
	$(BIN)/python locales/build.py --update

i18n-coverage: setup
	$(BIN)/python locales/coverage.py

# Everything, on every core (pytest-xdist: no test writes into the checkout, each releases into a course
# root of its own). The browser tests read the book that book-strict built.
test: setup sysdeps $(PROXY) book-strict
	$(BIN)/python -m pytest -q -n $(JOBS)

# The inner loop: the tests not marked slow, without the book or the system packages (README, "More").
test-fast: release
	$(BIN)/python -m pytest -q -m "not slow" -n $(JOBS)

clean:
	rm -rf _build
