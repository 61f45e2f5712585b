"""The terms a study's ``terms`` cells select first, kept the same across the study's resumes.

Given with ``--terms-file``, or found once in the pre-training corpus and kept in
``OUTPUT/terms.txt``. Their fingerprint is part of the identity of the terms cells and of their
fine-tunings only (:attr:`~tokenmask.experiments.plan.Cell.inputs`), so a resumed study may add
or drop the terms cells and keep every other cell. Studies recorded by an earlier tokenmask held
it in every cell's identity: :func:`identities_with_terms` lists those, which the runner accepts.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenmask.experiments.plan import Cell, plan_digest
from tokenmask.experiments.study_grid import TERMS, TERMS_FILE, domain_terms, terms_fingerprint
from tokenmask.recipes.config import PretrainConfig
from tokenmask.train.job import Reporter


def study_terms(
    output: Path, given: str | None, recorded: str | None, base: PretrainConfig, reporter: Reporter
) -> tuple[Path, Path | None]:
    """The terms file of a study's terms cells, and the file written just now (None if none).

    ``given`` (``--terms-file``, copied to ``OUTPUT/terms.txt`` the first time), else
    ``OUTPUT/terms.txt``: kept from an earlier start, or found in ``base``'s corpus now and
    written there. So ``OUTPUT/terms.txt`` holds the terms the cells select first, whether the
    strategy is in the plan or was dropped from it for a while. ``recorded``: the fingerprint
    the study's record holds (None: a new study, or one without terms cells now), which a study
    recorded before the copy was kept has alone.

    Raises:
        ValueError: a resumed study whose terms cells selected other terms (another file given,
            ``terms.txt`` changed, or the file given before left out), before anything is
            written; a corpus that cannot be read or holds no term.
    """
    kept = output / TERMS_FILE
    path = Path(given) if given is not None else kept
    if given is None and not kept.exists():
        if recorded is not None:
            raise ValueError(
                f"--resume: the '{TERMS}' cells of {output} selected the terms of a file given with --terms-file first: "
                "give it again"
            )
        domain_terms(base, kept, reporter)
        return kept, kept
    held = {terms for terms in (recorded, terms_fingerprint(str(kept))) if terms is not None}
    if held and held != {terms_fingerprint(str(path))}:
        raise ValueError(
            f"--resume: {path} holds other terms than the '{TERMS}' cells of {output} selected first: give theirs "
            f"({kept}) with --terms-file, or choose another --output"
        )
    if kept.exists():
        return path, None
    kept.parent.mkdir(parents=True, exist_ok=True)  # the given file's copy: its terms, whatever becomes of the file
    shutil.copyfile(path, kept)
    return path, kept


def identities_with_terms(cells: Sequence[Cell], shared: Mapping[str, Any], fingerprints: Collection[str]) -> dict[str, set[str]]:
    """The identities ``cells`` had when the plan's ``terms`` entry, one of ``fingerprints``, was
    part of every cell's (:func:`~tokenmask.experiments.plan.cell_digest` of ``shared`` with it,
    and without inputs), by cell name; a terms cell's only for the terms it selects now (other
    terms made another model).

    Cells ``token`` and ``terms`` selecting terms ``"aaaa"``, with fingerprints
    ``{"aaaa", "bbbb"}``: ``{"token": {<with aaaa>, <with bbbb>}, "terms": {<with aaaa>}}``.
    """
    former = {}
    for cell in cells:
        held = [cell.inputs["terms"]] if "terms" in cell.inputs else fingerprints
        former[cell.name] = {plan_digest({"plan": {**shared, "terms": terms}, "cell": dict(cell.coordinates)}) for terms in held}
    return former
