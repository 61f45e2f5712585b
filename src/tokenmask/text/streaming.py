"""A corpus read as a stream through Hugging Face ``datasets`` (``streaming=True``), for ``--streaming``.

Sources are a Hub dataset named ``hf:NAME[:CONFIG][:SPLIT]`` (a local folder in the Hub's
layout works too: ``hf:/data/my-corpus``), or the local files, folders and globs that
:mod:`tokenmask.text.corpus` reads, wrapped as an iterable dataset with one shard per file.
Nothing is read ahead, counted or cached. Each data-parallel rank reads its own share, split by
``datasets.distributed.split_dataset_by_node``: whole shards when their number is a multiple
of the world size, else every world-th document.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokenmask.text.config import ReadingConfig
from tokenmask.text.corpus import expand_paths, read_documents, read_texts

if TYPE_CHECKING:
    from datasets import IterableDataset

HUB_PREFIX = "hf:"
_READ_BATCH = 256  # documents per read from the dataset


def is_hub_name(source: str) -> bool:
    """Whether ``source`` names a Hub dataset (``hf:...``) rather than local files."""
    return source.startswith(HUB_PREFIX)


@dataclass(frozen=True)
class HubName:
    """A Hub dataset as written on the command line: ``hf:NAME[:CONFIG][:SPLIT]``.

    ``hf:wikimedia/wikipedia:20231101.en`` -> name ``wikimedia/wikipedia``, config
    ``20231101.en``, split ``train``; ``hf:allenai/c4:en:validation`` adds the split.
    """

    name: str
    config: str | None = None
    split: str = "train"

    @classmethod
    def parse(cls, source: str) -> HubName:
        """Raises: ValueError: not ``hf:NAME[:CONFIG][:SPLIT]``."""
        parts = source.removeprefix(HUB_PREFIX).split(":")
        if not parts[0] or len(parts) > 3 or any(not part for part in parts[1:]):
            raise ValueError(
                f"{source!r}: write a Hub dataset as hf:NAME[:CONFIG][:SPLIT], e.g. hf:wikimedia/wikipedia:20231101.en"
            )
        return cls(parts[0], parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else "train")


@dataclass(frozen=True)
class DocumentStream:
    """A rank's documents of a corpus, read afresh on every pass: a picklable description, so
    that each DataLoader worker opens its own reader.

    ``corpus`` is one ``hf:`` name, or local files, folders and globs, or empty for the bundled
    plays (one document per scene). ``rank`` of ``world`` picks this process's share. Folders
    and globs are expanded once, here: every epoch and every worker reads the same files.
    """

    corpus: tuple[str, ...]
    reading: ReadingConfig = field(default_factory=ReadingConfig)
    rank: int = 0
    world: int = 1
    hub: HubName | None = field(init=False, repr=False)
    """The Hub dataset, when ``corpus`` names one."""
    sources: tuple[str, ...] = field(init=False, repr=False)
    """The local files and dataset folders of ``corpus``, expanded; empty for a Hub dataset or the bundled plays."""

    def __post_init__(self) -> None:
        hub = [source for source in self.corpus if is_hub_name(source)]
        if hub and len(self.corpus) > 1:
            raise ValueError(f"a Hub dataset ({hub[0]}) is read alone: give it without other corpus sources")
        object.__setattr__(self, "hub", HubName.parse(hub[0]) if hub else None)  # frozen: resolved once
        local = () if hub else tuple(str(path) for path in expand_paths(self.corpus))  # refuses missing paths now
        object.__setattr__(self, "sources", local)

    def documents(self, *, skip: int = 0) -> Iterator[str]:
        """Every document of this rank's share in stream order (blank ones as they are), from
        document ``skip`` on: the ones before are read and passed over, not tokenized.

        Raises:
            ValueError: the text field is missing (the message names the fields there are), or
                holds something other than strings; the errors of :func:`~tokenmask.text.corpus.read_documents`.
        """
        column = self.reading.text_field
        dataset = self._dataset()
        number = 0
        for batch in dataset.iter(batch_size=_READ_BATCH):  # iter(), not __iter__: no splitting by DataLoader worker
            values = batch.get(column)
            if values is None:
                raise ValueError(
                    f"{self._name()}: no {column!r} field to read; there are {', '.join(map(repr, batch))} (--text-field)"
                )
            for value in values:
                if number >= skip:
                    yield _text(value, column, self._name())
                number += 1

    def _name(self) -> str:
        return self.corpus[0] if len(self.corpus) == 1 else "the corpus"

    def _dataset(self) -> IterableDataset:
        from datasets import IterableDataset, load_dataset
        from datasets.distributed import split_dataset_by_node

        if self.hub is not None:
            dataset: Any = load_dataset(self.hub.name, self.hub.config, split=self.hub.split, streaming=True)
        else:
            dataset = IterableDataset.from_generator(
                _local_records, gen_kwargs={"sources": list(self.sources or [""]), "reading": self.reading.keywords()}
            )  # one shard per source: split_dataset_by_node can hand whole files to ranks
        return split_dataset_by_node(dataset, rank=self.rank, world_size=self.world) if self.world > 1 else dataset


def _local_records(sources: list[str], reading: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The records of local ``sources`` (``[""]``: the bundled plays) under the text field's name."""
    from tokenmask.text.resources import shakespeare_scenes

    documents = read_documents(sources, **reading) if sources != [""] else iter(shakespeare_scenes())
    for text in documents:
        yield {reading["text_field"]: text}


def _text(value: Any, field: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: the {field!r} field holds {type(value).__name__}, not text (--text-field)")
    return value


def corpus_documents(corpus: Sequence[str], reading: ReadingConfig) -> Iterable[str]:
    """The non-blank documents of ``corpus``, streamed, or the bundled plays (one per scene, a list) when it is empty."""
    from tokenmask.text.resources import shakespeare_scenes

    if corpus and is_hub_name(corpus[0]):
        return (text for text in DocumentStream(tuple(corpus), reading).documents() if text.strip())
    if corpus:
        return read_texts(corpus, **reading.keywords())
    return shakespeare_scenes()
