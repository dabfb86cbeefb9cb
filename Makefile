# Everything a fresh machine needs, in two commands: `make book` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup sysdeps release book book-strict test clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

# Browser tests need Chromium and its driver; the grading sandbox needs bubblewrap.
sysdeps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v bwrap >/dev/null || \
	  { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver bubblewrap; }

# The chapters link to the student notebooks, so they are generated first.
release: setup
	$(BIN)/python -m autograde release

book: release
	$(BIN)/jupyter-book build .

book-strict: release
	$(BIN)/jupyter-book build . -W -n --keep-going

test: setup sysdeps book-strict
	$(BIN)/python -m pytest -q

clean:
	rm -rf _build
