"""What the commands print: masked examples, masking audits, PMI and term tables, training progress, the fill demo (rich)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokenmask.use.audit import Estimate, MaskingAudit
from tokenmask.use.preview import PmiVocabulary, TermTable

_STYLES = {"mask": "bold white on red", "random": "bold black on yellow", "keep": "bold black on green"}


def print_masked(examples: Sequence[dict[str, Any]], console: Console | None = None) -> None:
    """Original and corrupted tokens aligned in columns, targets coloured by outcome.

    Long examples wrap in aligned pairs of lines. Without colour (a pipe, ``NO_COLOR``), a
    third line marks targets: ``M`` mask, ``R`` random, ``K`` keep.
    """
    console = console or Console(highlight=False)
    plain = console.no_color or not console.is_terminal
    legend = Text("targets: ")
    for name, style in _STYLES.items():
        legend.append(f" {name} ", style=style)
        legend.append(" ")
    console.print(legend if not plain else "targets marked below the input: M mask, R random, K keep")
    counts = dict.fromkeys(_STYLES, 0)
    room = max(20, console.width - 12)
    for example in examples:
        console.print()
        cells = list(zip(example["tokens"], example["inputs"], example["outcomes"]))
        line: list[tuple[str, str, str]] = []
        used = 0
        for cell in cells + [None]:
            width = 0 if cell is None else max(len(cell[0]), len(cell[1])) + 1
            if cell is None or (line and used + width > room):
                _print_pair(console, line, plain)
                line, used = [], 0
            if cell is not None:
                line.append(cell)
                used += width
                if cell[2] in counts:
                    counts[cell[2]] += 1
    total = sum(counts.values())
    tokens = sum(len(e["tokens"]) for e in examples)
    console.print(f"\n{total} targets in {tokens} tokens: " + ", ".join(f"{n} {name}" for name, n in counts.items()))


def _print_pair(console: Console, cells: list[tuple[str, str, str]], plain: bool) -> None:
    original, corrupted, marks = Text("  original  "), Text("  input     "), Text("            ")
    for token, new, outcome in cells:
        width = max(len(token), len(new))
        style = _STYLES.get(outcome, "")
        original.append(token.ljust(width) + " ", style="underline" if style else "")
        corrupted.append(new.ljust(width), style=style)
        corrupted.append(" ")
        marks.append((outcome[0].upper() if style else "").ljust(width + 1))
    console.print(original, no_wrap=True, overflow="ignore")
    console.print(corrupted, no_wrap=True, overflow="ignore")
    if plain:
        console.print(marks, no_wrap=True, overflow="ignore")


def _estimate_row(estimate: Estimate) -> list[str]:
    low, high = estimate.interval
    expected = "" if estimate.expected is None else f"{estimate.expected:.4f}"
    verdict = {True: "[green]ok[/]", False: "[red]outside[/]", None: ""}[estimate.consistent]
    return [estimate.name, f"{estimate.count:,}", f"{estimate.rate:.4f}", f"{low:.4f}–{high:.4f}", expected, verdict]


def print_audit(audit: MaskingAudit, console: Console | None = None) -> None:
    """Tables of rates and unit lengths with 99% intervals; the must-be-zero counts."""
    console = console or Console(highlight=False)
    console.print(
        f"{audit.sequences:,} sequences, {audit.tokens:,} tokens, {audit.eligible:,} eligible, {audit.targets:,} targets"
    )
    sections = (
        ("selection (of eligible tokens) and corruption (of targets)", audit.estimates()),
        (f"lengths of selected units, in {audit.unit_length_kind}", audit.length_estimates()),
    )
    for title, estimates in sections:
        table = Table(title=title)
        for column in ("measure", "count", "share", "99% interval", "configured", "check"):
            table.add_column(column, no_wrap=True)
        for estimate in estimates:
            table.add_row(*_estimate_row(estimate))
        console.print(table)
    for label, value in (
        ("special tokens selected", audit.special_targets),
        ("protected ids drawn as random replacements", audit.protected_draws),
    ):
        mark = "[green]ok[/]" if value == 0 else "[red]ERROR[/]"
        console.print(f"{label}: {value} (must be 0) {mark}")
    console.print(
        "[dim]Lengths leave out units cut by a block end or separator. min_masks_per_sequence "
        "raises the selected share on short sequences.[/]"
    )
    if audit.term_tokens is not None:
        console.print(
            "[dim]Terms come first. Checked (bernoulli): every unit holding a term is selected, and the "
            "other units at q = max(0, (p·E - P) / (E - P)) of their sequence (E eligible tokens, P in term "
            "units; configured = the mean q), which keeps the token share at p while terms are under it.[/]"
        )


def print_pmi(vocabulary: PmiVocabulary, *, top: int, console: Console | None = None) -> None:
    """The best ``top`` n-grams of each n, with count and PMI; one line on how they were chosen."""
    console = console or Console(highlight=False)
    console.print(
        f"{len(vocabulary.entries):,} n-grams from {vocabulary.words:,} words (size {vocabulary.vocab_size:,}, "
        f"each seen at least {vocabulary.min_count} times)"
        + (f"; {'loaded from' if vocabulary.from_cache else 'cached in'} {vocabulary.cache}" if vocabulary.cache else "")
    )
    for n in sorted({len(e.words) for e in vocabulary.entries}):
        entries = [e for e in vocabulary.entries if len(e.words) == n]
        table = Table(title=f"{n}-grams ({len(entries):,})")
        for column in ("n-gram", "count", "PMI"):
            table.add_column(column, no_wrap=True)
        for entry in entries[:top]:
            table.add_row(" ".join(entry.words), f"{entry.count:,}", f"{entry.pmi:.2f}")
        console.print(table)


def print_terms(table: TermTable, path: Path, *, show: int, console: Console | None = None) -> None:
    """The best ``show`` terms with their counts, both frequencies and scores; where the file is."""
    console = console or Console(highlight=False)
    console.print(
        f"{len(table.entries):,} terms of {table.words:,} words (each seen at least {table.min_count} times), "
        f"against {table.background}" + (f" ({table.background_words:,} words)" if table.background_words else ""),
        soft_wrap=True,
    )
    shown = Table(title=f"the best {min(show, len(table.entries)):,}")
    for column in ("term", "count", "per million", "background per million", "score"):
        shown.add_column(column, no_wrap=True, justify="left" if column == "term" else "right")
    for e in table.entries[:show]:
        shown.add_row(e.text, f"{e.count:,}", f"{e.per_million:,.1f}", f"{e.background_per_million:,.2f}", f"{e.score:.2f}")
    console.print(shown)
    console.print(f"wrote {len(table.entries):,} terms to {path}, best first: mask them with --mask-terms {path}", soft_wrap=True)


class ProgressReporter:
    """Training progress on the terminal: messages, and a bar with loss, tokens/s and ETA.

    Under ``torchrun`` / ``accelerate launch`` only the main process (``RANK`` 0) shows anything.
    """

    def __init__(self, console: Console | None = None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.shown = os.environ.get("RANK", "0") == "0"  # the launcher's rank (torchrun, accelerate launch)
        self.console = console or Console(highlight=False, quiet=not self.shown)
        self.progress = Progress(
            TextColumn("step {task.completed}"),
            BarColumn(),
            TextColumn("loss {task.fields[loss]:.3f}  {task.fields[speed]:,.0f} tok/s"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.task = self.progress.add_task("train", total=None, loss=float("nan"), speed=0.0)

    def __enter__(self) -> ProgressReporter:
        if self.shown:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self.progress.stop()

    def message(self, text: str) -> None:
        # as written: the terminal wraps it, rich neither breaks nor crops a path, nor reads [..] as markup
        self.progress.console.print(text, soft_wrap=True, markup=False)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        self.progress.update(self.task, completed=step, total=total, loss=loss, speed=tokens_per_s)


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int | None], None]]:
    """A bar on stderr while the block runs; yields ``(done, total) -> None`` to move it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    bar = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=True, disable=not console.is_terminal,  # a log file gets no bar (nor its blank line)
    )  # fmt: skip
    with bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def print_fill_demo(fill, lines: Sequence[str], console: Console | None = None) -> None:
    """Hide one word of each held-out line and show the model's top 3 guesses, with a tally.

    The hidden word is picked by a hash of the line (:func:`tokenmask.use.fill.demo_word`), so
    the demo shows what the model gets right and wrong, the same on every run.
    """
    from tokenmask.use.fill import fill_demo

    console = console or Console(highlight=False)
    console.print("\nfill-mask on held-out lines (one word hidden, picked by a hash of the line):")
    records = fill_demo(fill, lines)
    for record in records:
        shown = ", ".join(f"{g['token']} ({g['score']:.2f})" for g in record["guesses"])
        console.print(
            f"  {record['masked']}\n    answer: {record['answer']}   guesses: {shown}   "
            f"{'[green]in top 3[/]' if record['hit'] else ''}"
        )
    console.print(f"answer among the top 3 guesses in {sum(r['hit'] for r in records)} of {len(records)} lines")
