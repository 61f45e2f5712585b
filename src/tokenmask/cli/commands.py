"""What each command does: one library call on one config, then the results printed.

The parser (:mod:`tokenmask.cli.parser`) hands each command its parsed arguments; the settings
of a config come from :func:`tokenmask.cli.flags.config_from` (defaults < ``--config`` file <
flags). Heavy imports happen here, inside the commands, so ``tokenmask --help`` stays instant.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tokenmask.cli.flags import config_from, requested_settings
from tokenmask.masking.config import MaskingConfig
from tokenmask.settings import build


def masking_config(args: argparse.Namespace) -> MaskingConfig:
    """The masking settings typed on the command line (``mask``, ``stats``, ``evaluate``)."""
    return config_from(MaskingConfig, args)


def _collator(args: argparse.Namespace, *, seed_offset: int = 0):
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.text.tokenizer import load_tokenizer

    return MaskingCollator.from_config(load_tokenizer(_tokenizer_name(args)), masking_config(args), seed=args.seed + seed_offset)


def _tokenizer_name(args: argparse.Namespace) -> str:
    """``--tokenizer``, or the default where no model brings its own (mask, stats)."""
    from tokenmask.text.tokenizer import DEFAULT_TOKENIZER

    return args.tokenizer or DEFAULT_TOKENIZER


def _phrases(args: argparse.Namespace, tokenizer: Any, corpus: Any = (), reading: Any = None) -> Any:
    """The phrases the masking flags ask for (terms, the PMI n-grams of ``corpus`` or the plays), or None."""
    from tokenmask.blocks.pmi import corpus_vocabulary, masking_phrases

    units = masking_config(args).units
    return masking_phrases(units, tokenizer, lambda: corpus_vocabulary(corpus, tokenizer, units, reading=reading))


def _masking_settings(args: argparse.Namespace) -> dict[str, Any]:
    from tokenmask.settings import flatten

    return {"tokenizer": _tokenizer_name(args), "seed": args.seed, **flatten(masking_config(args))}


def cmd_mask(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import masked_examples, print_masked
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import sample_text

    if args.text and args.file:
        raise ValueError("give TEXT or --file, not both")
    if args.file:
        texts = list(read_texts([args.file]))
    elif args.text:
        texts = [" ".join(args.text)]
    else:
        texts = sample_text()
    if not texts:
        raise ValueError("nothing to mask: the input holds no text")
    collator = _collator(args)
    phrases = _phrases(args, collator.tokenizer)  # PMI n-grams of the bundled plays: a few lines hold too few
    examples = masked_examples(texts, collator, max_length=args.max_length, phrases=phrases)
    if args.json:
        print(json.dumps({"settings": _masking_settings(args), "examples": examples}, ensure_ascii=False, indent=2))
    else:
        print_masked(examples)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from tokenmask.blocks.encode import encode_lazily
    from tokenmask.blocks.pack import pack_texts
    from tokenmask.cli.render import print_audit
    from tokenmask.text.config import ReadingConfig
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import shakespeare_scenes
    from tokenmask.use.audit import audit_masking

    collator = _collator(args)
    texts = read_texts(args.corpus, text_field=args.text_field) if args.corpus else shakespeare_scenes()
    reading = ReadingConfig(document_boundary="line", text_field=args.text_field)  # as read_texts reads
    phrases = _phrases(args, collator.tokenizer, args.corpus, reading)
    examples: Iterable[Mapping[str, Any]]
    if args.pack:
        examples = pack_texts(texts, collator.tokenizer, block_length=args.max_length, phrases=phrases)
    else:
        examples = encode_lazily(texts, collator.tokenizer, max_length=args.max_length, phrases=phrases)
    with Progress(transient=True, disable=args.json) as progress:
        task = progress.add_task("masking", total=args.max_tokens)
        audit = audit_masking(
            examples,
            collator,
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            on_batch=lambda n: progress.advance(task, n),
        )
    if args.json:
        print(json.dumps({"settings": _masking_settings(args), **audit.to_dict()}, indent=2))
    else:
        print_audit(audit)
    return 0 if audit.special_targets == 0 and audit.protected_draws == 0 else 1


def cmd_pretrain(args: argparse.Namespace) -> int:
    from tokenmask.blocks.build import held_out_lines
    from tokenmask.blocks.load import corpus_documents
    from tokenmask.cli.render import ProgressReporter, print_fill_demo
    from tokenmask.recipes.config import PretrainConfig, pretrain_config
    from tokenmask.recipes.pretrain import pretrain

    config = _with_output(pretrain_config(requested_settings(PretrainConfig, args, config_file=args.config)))
    with ProgressReporter() as reporter:
        result = pretrain(config, reporter, command=args.command_line)
    if not reporter.shown:  # another process of a distributed run: the main one reports
        return 0
    print(
        f"trained {result.steps:,} steps on {result.tokens:,} tokens in {result.seconds / 60:.1f} min; "
        f"model in {result.output}/model; metrics in {result.output}/metrics.jsonl and metrics.png"
    )
    if not args.no_demo:
        lines = held_out_lines(corpus_documents(config.corpus, config.reading), config.blocks.validation_share, 6)
        print_fill_demo(Path(result.output) / "model", lines)
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.recipes.config import FinetuneConfig
    from tokenmask.recipes.finetune import BEST_FOLDER, CONFUSION_FILE, RESULTS_FILE, finetune
    from tokenmask.use.metrics import format_confusion

    config = _with_output(config_from(FinetuneConfig, args, config_file=args.config))
    with ProgressReporter() as reporter:
        result = finetune(config, reporter, command=args.command_line)
    if not reporter.shown:  # another process of a distributed run: the main one reports
        return 0
    final = result.final.metrics()
    shown = ", ".join(f"{name} {value:.4f}" for name, value in final.items())
    print(f"fine-tuned {result.steps:,} steps in {result.seconds / 60:.1f} min; validation at step {result.final_step}: {shown}")
    print(
        f"best {result.metric} {result.best[result.metric]:.4f} at step {result.best_step} (model in {result.output}/{BEST_FOLDER})"
    )
    print(f"confusion matrix (validation, step {result.final_step}):")
    print(format_confusion(result.final.scores.confusion, result.labels))
    print(
        f"model in {result.output}/model; results in {result.output}/{RESULTS_FILE} and {CONFUSION_FILE}; "
        f"metrics in {result.output}/metrics.jsonl and metrics.png"
    )
    return 0


def _rates(value: Any) -> list[float]:
    """``"0,0.05,0.1" -> [0.0, 0.05, 0.1]`` (a YAML list or number too); raises ValueError for anything else."""
    parts = value if isinstance(value, list | tuple) else str(value).split(",")
    try:
        return [float(part) for part in parts if str(part).strip()]
    except ValueError:
        raise ValueError(f"--rates: expected comma-separated numbers, e.g. 0,0.05,0.1; got {value!r}") from None


def cmd_compare_augment(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.labelled.robustness import parse_corruptions
    from tokenmask.recipes.compare import ComparePlan, compare_augment, parse_train_sizes
    from tokenmask.recipes.compare_report import COMPARE_PLOT
    from tokenmask.recipes.config import FinetuneConfig
    from tokenmask.recipes.report import REPORT_FILE

    requested = requested_settings(FinetuneConfig, args, config_file=args.config)
    if not {"epochs", "max_steps", "max_tokens", "max_time"} & requested.keys():  # 9 minutes each would be a surprise
        raise ValueError("give the length of each run: --epochs, --max-steps, --max-tokens or --max-time (minutes per run)")
    if "augment_rate" in requested:
        raise ValueError("compare-augment sets the augmentation rate of each run: give them with --rates, not --augment-rate")
    if args.corruptions and not args.robustness:
        raise ValueError("--corruptions chooses the sets of --robustness: give --robustness too")
    adaptive = bool(requested.pop("augment_adaptive", False))  # an arm of its own here, not a setting of every run
    config = _with_output(build(FinetuneConfig, requested))
    plan = ComparePlan(
        rates=tuple(_rates(args.rates)),
        seeds=args.seeds,
        train_sizes=parse_train_sizes(args.train_sizes),
        corruptions=parse_corruptions(args.corruptions or ()) if args.robustness else (),
        adaptive=adaptive,
        first_seed=config.loop.seed,
        keep_models=args.keep_models,
    )
    with ProgressReporter() as reporter:
        comparison = compare_augment(config, plan, reporter=reporter, command=args.command_line)
    print(comparison.table())
    print(
        f"runs in {comparison.output}/size-*/*/seed-*; summary in {comparison.output}/compare.json, "
        f"{COMPARE_PLOT} and {REPORT_FILE}"
    )
    return 0


def _names(value: str) -> tuple[str, ...]:
    """``"token, span" -> ("token", "span")``."""
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


def _rate_ends(value: str) -> tuple[float | None, ...]:
    """``"none,0.15" -> (None, 0.15)``; raises ValueError for anything else."""
    try:
        return tuple(None if part.lower() == "none" else float(part) for part in _names(value))
    except ValueError:
        raise ValueError(f"--rate-ends: expected 'none' or numbers, comma-separated, e.g. none,0.15; got {value!r}") from None


def cmd_study(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tokenmask.cli.render import ProgressReporter
    from tokenmask.recipes.config import FINETUNE_LOOP, FinetuneConfig, PretrainConfig
    from tokenmask.recipes.study import run_study, study_config
    from tokenmask.recipes.study_grid import StudyGrid
    from tokenmask.recipes.study_report import study_table, write_study_report

    grid = StudyGrid(
        strategies=_names(args.strategies), rates=tuple(_rates(args.rates)), corruptions=_names(args.corruption),
        rate_ends=_rate_ends(args.rate_ends), seeds=args.seeds,
    )  # fmt: skip
    config = study_config(requested_settings(PretrainConfig, args), grid, jobs=args.jobs)
    if args.finetune:  # the built-in data, on the device and at the precision of the pre-training
        loop = replace(
            FINETUNE_LOOP, max_steps=args.finetune_max_steps, lr=args.finetune_lr, eval_every=args.finetune_max_steps,
            cpu=config.base.loop.cpu, precision=config.base.loop.precision,
        )  # fmt: skip
        config = replace(config, finetune=FinetuneConfig(loop=loop, max_length=config.base.blocks.max_length))
    with ProgressReporter() as reporter:
        study = run_study(config, reporter, command=args.command_line)
    print(study_table(study))
    report = write_study_report(config.output)
    print(f"cells in {config.output}/cells; results in {config.output}/study.json; report in {report}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    import torch

    from tokenmask.blocks.config import BlocksConfig
    from tokenmask.blocks.load import load_blocks, load_phrases
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.text.config import ReadingConfig
    from tokenmask.train.models import load_model, paired_tokenizer
    from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm, inference_device, pseudo_perplexity

    tokenizer = paired_tokenizer(args.model, args.tokenizer)
    shape = config_from(BlocksConfig, args)
    model = load_model(args.model, vocab_size=len(tokenizer), max_length=shape.max_length)
    # the blocks (and split) a pre-training run with the same corpus and settings uses
    reading, units = config_from(ReadingConfig, args), masking_config(args).units
    phrases = load_phrases(args.corpus, tokenizer, units, reading=reading, blocks=shape)
    blocks = load_blocks(args.corpus, tokenizer, reading=reading, blocks=shape, phrases=phrases)
    collator = MaskingCollator.from_config(tokenizer, masking_config(args), seed=args.seed + EVAL_SEED_OFFSET)
    # a corpus given is evaluated whole (its first blocks); the bundled plays on their held-out side
    sides = (blocks.train, blocks.validation) if args.corpus else (blocks.validation,)
    data = list(itertools.islice(itertools.chain(*sides), args.max_blocks))
    device = inference_device()
    torch.nn.Module.to(model, device)  # (transformers' typing of .to wants a dtype or device kwarg)
    metrics = evaluate_mlm(model, data, collator, batch_size=32, device=device)
    pseudo = None
    if args.pseudo_perplexity:
        pseudo = pseudo_perplexity(model, data, tokenizer, max_tokens=args.max_tokens, device=device)
    if args.json:
        report = {"model": str(args.model), "blocks": len(data), **metrics.as_dict()}
        print(json.dumps({**report, **(pseudo.as_dict() if pseudo else {})}, indent=2))
        return 0
    print(
        f"{metrics.targets:,} masked tokens in {len(data):,} blocks: loss {metrics.loss:.4f}, "
        f"perplexity {metrics.perplexity:.2f}, accuracy {metrics.accuracy:.4f}"
    )
    if pseudo:
        print(
            f"pseudo-perplexity {pseudo.pseudo_perplexity:.2f} over {pseudo.scored_tokens:,} tokens masked one at a time "
            f"(pseudo-log-likelihood {pseudo.pseudo_log_likelihood:.1f} nats)"
        )
    return 0


def cmd_pmi(args: argparse.Namespace) -> int:
    from tokenmask.blocks.config import BlocksConfig
    from tokenmask.blocks.pmi import corpus_vocabulary
    from tokenmask.cli.render import print_pmi
    from tokenmask.masking.config import UnitConfig
    from tokenmask.text.config import ReadingConfig
    from tokenmask.text.tokenizer import load_tokenizer

    if args.top < 1:
        raise ValueError(f"--top must be >= 1; got {args.top}")
    tokenizer = load_tokenizer(_tokenizer_name(args))
    units, cache = config_from(UnitConfig, args), config_from(BlocksConfig, args)
    vocabulary = corpus_vocabulary(
        args.corpus, tokenizer, units, reading=config_from(ReadingConfig, args), cache_dir=cache.cache_dir,
        use_cache=not cache.no_cache,
    )  # fmt: skip
    if args.json:
        data = vocabulary.to_json()
        print(
            json.dumps({**data, "entries": data["entries"][: args.top], "cache": vocabulary.cache}, ensure_ascii=False, indent=2)
        )
    else:
        print_pmi(vocabulary, top=args.top)
    return 0


def cmd_fill(args: argparse.Namespace) -> int:
    from tokenmask.use.fill import fill_mask, load_fill_mask

    predictions = fill_mask(load_fill_mask(args.model), " ".join(args.text), top_k=args.top_k)
    if args.json:
        print(json.dumps({"text": " ".join(args.text), "predictions": predictions}, indent=2))
    else:
        for number, per_mask in enumerate(predictions, start=1):
            print(f"mask {number}: " + ", ".join(f"{p['token']} ({p['score']:.3f})" for p in per_mask))
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from tokenmask.use.embed import embed_corpus

    bar = Progress(
        TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True,
    )  # fmt: skip
    with bar:
        task = bar.add_task("embed", total=None)
        run = embed_corpus(
            args.model, args.input, args.output, text_field=args.text_field, batch_size=args.batch_size,
            max_length=args.max_length, normalize=args.normalize,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )  # fmt: skip
    kind = "unit-length" if run.normalized else "unnormalised"
    print(
        f"embedded {run.texts:,} texts into {kind} {run.dims}-dim vectors in {run.seconds:.1f} s "
        f"({run.texts / max(run.seconds, 1e-9):,.0f} texts/s); saved to {run.output}"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from tokenmask.use.embed import search_corpus

    hits = search_corpus(
        args.model, args.index, args.texts, args.query,
        top_k=args.top_k, text_field=args.text_field, max_length=args.max_length,
    )  # fmt: skip
    if args.json:
        results = [{"rank": h.rank, "row": h.row, "score": h.score, "text": h.text} for h in hits]
        print(json.dumps({"query": args.query, "model": str(args.model), "results": results}, ensure_ascii=False, indent=2))
    else:
        for hit in hits:
            print(f"{hit.rank:>3}  {hit.score:.4f}  {hit.text}")
    return 0


def cmd_tokenizer_train(args: argparse.Namespace) -> int:
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import shakespeare_lines
    from tokenmask.text.tokenizer import train_tokenizer

    if args.vocab_size < 50:
        raise ValueError(f"--vocab-size must be >= 50; got {args.vocab_size}")
    texts = read_texts(args.corpus) if args.corpus else iter(shakespeare_lines())
    tokenizer = train_tokenizer(texts, kind=args.kind, vocab_size=args.vocab_size)
    args.output.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(args.output)
    sample = "Shall I compare thee to a summer's day?"
    print(f"{args.kind} tokenizer with {len(tokenizer):,} entries saved to {args.output}")
    print(f"  {sample!r} -> {tokenizer.tokenize(sample)}")
    return 0


def _with_output(config: Any) -> Any:
    if not config.loop.output:
        raise ValueError("--output is required (on the command line or in --config)")
    return config
