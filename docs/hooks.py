"""MkDocs hook: the pages generated at every build, so that none of them is a hand-kept copy.

- ``reference/settings.md``: every flag of every command, from the declarations
  (:func:`tokenmask.cli.reference.settings_reference`);
- ``api/*.md``: the Python API, one page per package, one entry per public name
  (``tokenmask.__all__`` and ``tokenmask.masking.__all__``), rendered by mkdocstrings from the
  docstrings where the names are defined, so the pages follow the code when modules move;
- ``results.md``: ``benchmarks/RESULTS.md``, the measured results, as it is in the repository.

It also holds :class:`SphinxRoles`, the griffe extension (named in ``mkdocs.yml``) that shows the
docstrings' Sphinx roles (``:func:`x` ``) as code.

``mkdocs.yml`` names this file under ``hooks:``; ``tests/test_docs.py`` imports it too.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from griffe import Extension

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SETTINGS_PAGE = "reference/settings.md"


@dataclass(frozen=True)
class ApiPage:
    path: str  # under docs/
    title: str
    intro: str
    packages: tuple[str, ...]  # modules whose public names the page holds (prefixes of dotted paths)


API_PAGES = (
    ApiPage(
        "api/masking.md",
        "Masking",
        "`tokenmask.masking`: pure numpy/torch masking, unit maps → select → corrupt, and its configs. "
        "The guide: [Masking](../masking.md).",
        ("tokenmask.masking",),
    ),
    ApiPage(
        "api/text-and-blocks.md",
        "Corpora, tokenizers and blocks",
        "Reading and checking corpora, loading tokenizers, phrases and terms (`tokenmask.text`); encoding, "
        "packing, caching blocks and the PMI vocabulary (`tokenmask.blocks`). "
        "The guide: [Corpora and the block cache](../pretraining/corpora.md).",
        ("tokenmask.text", "tokenmask.blocks"),
    ),
    ApiPage(
        "api/collate.md",
        "Collator, augmenter, Trainer callback",
        "`tokenmask.collate`: the collator, the fine-tuning augmenter and the Hugging Face `Trainer` callback. "
        "The guide: [Masking](../masking.md), [Fine-tuning](../finetuning.md).",
        ("tokenmask.collate",),
    ),
    ApiPage(
        "api/labelled.md",
        "Labelled data",
        "`tokenmask.labelled`: labelled data for fine-tuning: reading, alignment to sub-tokens, the length-grouped "
        "sampler, questions and retrieval pairs. The guide: [Fine-tuning](../finetuning.md).",
        ("tokenmask.labelled",),
    ),
    ApiPage(
        "api/training.md",
        "Training: the loop and the jobs",
        "`tokenmask.train` (the loop's config, models), `tokenmask.recipes` (the pre-training and fine-tuning jobs "
        "and their configs) and `tokenmask.hub` (checkpoints named by Hub id). The guide: "
        "[Pre-training](../pretraining/index.md), [Start from a Hub checkpoint](../hub.md), "
        "[Fine-tuning](../finetuning.md), [Settings, flags and YAML configs](../configuration.md).",
        ("tokenmask.train", "tokenmask.recipes", "tokenmask.hub"),
    ),
    ApiPage(
        "api/experiments.md",
        "Experiments: the study",
        "`tokenmask.experiments`: the study, its grid, runner, paired statistics and "
        "report. The guide: [Experiments](../experiments.md).",
        ("tokenmask.experiments",),
    ),
    ApiPage(
        "api/use.md",
        "Using a model",
        "`tokenmask.use`: evaluation at fixed masks, fill-mask, answers and their SQuAD scores, embeddings, search "
        "and retrieval scores (BM25 beside them), the masking audit. "
        "The guide: [Pre-training](../pretraining/index.md), [Embeddings and retrieval](../embeddings.md).",
        ("tokenmask.use",),
    ),
)


def public_names() -> dict[str, str]:
    """``{"tokenmask.MaskingCollator": "tokenmask.collate.collator", ...}``: each public name, as a user
    imports it, and the module that defines it (``tokenmask`` first, then ``tokenmask.masking``)."""
    names: dict[str, str] = {}
    for package in ("tokenmask", "tokenmask.masking"):
        module = importlib.import_module(package)
        for name in module.__all__:
            names.setdefault(name, f"{package}.{name}")
    defined: dict[str, str] = {}
    for name, public in names.items():
        package = importlib.import_module(public.rsplit(".", 1)[0])
        defined[public] = _defining_module(package, name)
    return defined


def _defining_module(package, name: str) -> str:
    exports = getattr(package, "_EXPORTS", None)  # the lazy-import table: no torch import to find out
    if isinstance(exports, dict) and name in exports:
        where = exports[name]
        return where if where.startswith("tokenmask") else f"{package.__name__}.{where}"
    obj = getattr(package, name)
    return getattr(obj, "__module__", None) or package.__name__


def _page_of(module: str) -> ApiPage | None:
    for page in API_PAGES:
        if any(module == p or module.startswith(p + ".") for p in page.packages):
            return page
    return None


def api_pages() -> tuple[dict[str, str], list[str]]:
    """The Markdown of each API page, and the public names on no page."""
    entries: dict[str, list[tuple[str, str]]] = {page.path: [] for page in API_PAGES}
    unplaced = []
    for public, module in sorted(public_names().items(), key=lambda item: item[1]):
        page = _page_of(module)
        if page is None:
            unplaced.append(f"{public} ({module})")
            continue
        entries[page.path].append((public, f"{module}.{public.rsplit('.', 1)[1]}"))
    pages = {}
    for page in API_PAGES:
        lines = [f"# {page.title}", "", page.intro, ""]
        for public, target in entries[page.path]:
            lines += [
                f"::: {target}",
                "    options:",
                f'      heading: "{public}"',
                f"      toc_label: {public.rsplit('.', 1)[1]}",
            ]
            lines.append("")
        pages[page.path] = "\n".join(lines)
    return pages, unplaced


def on_files(files, config):
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    from tokenmask.cli.reference import settings_reference

    files.append(File.generated(config, SETTINGS_PAGE, content=settings_reference()))
    pages, unplaced = api_pages()
    if unplaced:
        raise PluginError("public names on no API page (add their package to API_PAGES in docs/hooks.py): " + ", ".join(unplaced))
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    files.append(File.generated(config, "results.md", abs_src_path=str(RESULTS)))
    return files


_ROLE = re.compile(r":(?:func|meth|class|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


class SphinxRoles(Extension):
    """The docstrings write references as Sphinx roles (``:func:`select_units` ``), which Markdown
    would print as they are: show each as inline code (``~a.b.c`` as ``c``, as Sphinx does)."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_as_code, obj.docstring.value)


def _as_code(match: re.Match) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"
