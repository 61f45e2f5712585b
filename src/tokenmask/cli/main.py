"""The ``tokenmask`` command: argv in, one library call per subcommand, results out.

Errors in the user's input print one line naming the problem and exit with code 2.
Heavy imports (torch, transformers) happen inside the subcommands, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shlex
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from tokenmask.masking.config import STRATEGIES, CorruptionConfig, SelectionConfig, UnitConfig
from tokenmask.train.interrupt import Interrupted  # signal and threading only: --help stays fast

# Dataclass field -> (flag name, MaskingCollator keyword) where they differ from the field name.
_RENAMED = {"mode": ("selection", "selection"), "per_unit": ("corrupt-per-unit", "corrupt_per_unit")}
# 'given' needs spans in each example, which only the Python API can pass.
_CHOICES = {"strategy": tuple(x for x in STRATEGIES if x != "given"), "mode": ("bernoulli", "exact")}


def _add_masking_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per masking setting, help text from the dataclass field docs."""
    group = parser.add_argument_group("masking")
    for config in (UnitConfig, SelectionConfig, CorruptionConfig):
        for f in fields(config):
            flag, dest = _RENAMED.get(f.name, (f.name.replace("_", "-"), f.name))
            default = None if f.default is MISSING else f.default
            help_text = f"{f.metadata.get('help', '')} (default: {default})"
            if isinstance(default, bool):
                group.add_argument(f"--{flag}", dest=dest, action="store_true", help=help_text)
                continue
            kind = str if f.name in _CHOICES else float if isinstance(default, float) else int
            group.add_argument(
                f"--{flag}",
                dest=dest,
                type=kind,
                default=default,
                choices=_CHOICES.get(f.name),
                help=help_text,
            )
    group.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    group.add_argument(
        "--tokenizer",
        help="tokenizer folder, or a built-in name: bert-base-uncased, roberta-gpt2, minilm (default: the model's "
        "own for evaluate and pretrain --init, else bert-base-uncased; with a model, it must have the model's vocabulary)",
    )


def _masking_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """The MaskingCollator keyword arguments given on the command line."""
    keywords = {}
    for config in (UnitConfig, SelectionConfig, CorruptionConfig):
        for f in fields(config):
            dest = _RENAMED.get(f.name, (None, f.name))[1]
            keywords[dest] = getattr(args, dest)
    return keywords


def _collator(args: argparse.Namespace):
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.text.tokenizer import load_tokenizer

    return MaskingCollator(load_tokenizer(_tokenizer_name(args)), seed=args.seed, **_masking_keywords(args))


def _tokenizer_name(args: argparse.Namespace) -> str:
    """``--tokenizer``, or the default where no model brings its own (mask, stats)."""
    from tokenmask.text.tokenizer import DEFAULT_TOKENIZER

    return args.tokenizer or DEFAULT_TOKENIZER


def _masking_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"tokenizer": _tokenizer_name(args), "seed": args.seed, **_masking_keywords(args)}


def _cmd_mask(args: argparse.Namespace) -> int:
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import sample_text
    from tokenmask.cli.render import masked_examples, print_masked

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
    examples = masked_examples(texts, collator, max_length=args.max_length)
    if args.json:
        print(json.dumps({"settings": _masking_settings(args), "examples": examples}, ensure_ascii=False, indent=2))
    else:
        print_masked(examples)
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from tokenmask.use.audit import audit_masking
    from tokenmask.blocks.pack import pack_texts
    from tokenmask.text.corpus import read_texts
    from tokenmask.blocks.encode import encode_lazily
    from tokenmask.text.resources import shakespeare_scenes
    from tokenmask.cli.render import print_audit

    collator = _collator(args)
    texts = read_texts(args.corpus, text_field=args.text_field) if args.corpus else shakespeare_scenes()
    if args.pack:
        examples = pack_texts(texts, collator.tokenizer, block_length=args.max_length)
    else:
        examples = encode_lazily(texts, collator.tokenizer, max_length=args.max_length)
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


_PRETRAIN_FLAGS = (
    "preset", "init", "max_length", "batch_size", "grad_accum", "lr", "weight_decay", "warmup",
    "schedule", "max_steps", "max_tokens", "max_time", "eval_every", "eval_blocks", "save_every", "keep_last",
    "validation_share", "dupe_factor", "mlm_probability_end", "eval_mlm_probability", "precision", "cpu",
    "document_unit", "text_field", "strict", "max_line_bytes", "cache_dir", "no_cache", "num_workers", "max_bad_steps",
)


def _add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    from tokenmask.recipes.config import PretrainConfig
    from tokenmask.train.models import PRESETS

    docs = {f.name: f for f in fields(PretrainConfig)}
    choices = {
        "preset": tuple(PRESETS), "schedule": ("linear", "cosine"), "precision": ("auto", "fp32", "bf16"),
        "document_unit": ("paragraph", "file", "line"),
    }  # fmt: skip
    defaults = {"max_time": 9.0}
    texts = ("preset", "init", "schedule", "precision", "document_unit", "text_field", "cache_dir")
    numbers = ("lr", "weight_decay", "warmup", "max_time", "validation_share", "mlm_probability_end", "eval_mlm_probability")
    group = parser.add_argument_group("training")
    for name in _PRETRAIN_FLAGS:
        f = docs[name]
        default = defaults.get(name, f.default)
        flag, help_text = f"--{name.replace('_', '-')}", f"{f.metadata['help']} (default: {default})"
        if isinstance(default, bool):
            group.add_argument(flag, action="store_true", help=help_text)
            continue
        kind = str if name in texts else float if name in numbers else int
        group.add_argument(flag, type=kind, default=default, choices=choices.get(name), help=help_text)


def apply_config_file(args: argparse.Namespace, parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Fill ``args`` from ``args.config`` (YAML) wherever the command line did not set a flag.

    Keys are flag names (``lr``, ``max-steps`` or ``max_steps``, ``strategy``, ``corpus``, ``data``,
    ``eval``…); a list setting takes a list or one string.

    Raises:
        ValueError: unreadable YAML, not a mapping, or a key that is no flag of the command.
    """
    import yaml

    try:
        settings = yaml.safe_load(Path(args.config).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{args.config}: not valid YAML ({error})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{args.config}: expected a mapping of settings")
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config", "run")}
    given = {a.dest for a in actions.values() for o in a.option_strings for t in argv if t == o or t.startswith(o + "=")}
    given |= {a.dest for a in actions.values() if not a.option_strings and getattr(args, a.dest, None)}  # CORPUS, DATA
    for key, value in settings.items():
        dest = str(key).replace("-", "_")
        if dest not in actions:
            raise ValueError(f"{args.config}: unknown setting {key!r}")
        if dest in given:
            continue  # flags override the file
        action = actions[dest]
        if action.nargs in ("*", "+"):  # a list: CORPUS, DATA, --eval
            value = [value] if isinstance(value, str) else list(value)
        elif action.type is not None and value is not None:
            value = action.type(value)
        if action.choices is not None and value not in action.choices:
            raise ValueError(f"{args.config}: {key} must be one of {', '.join(map(str, action.choices))}; got {value!r}")
        setattr(args, dest, value)


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter, print_fill_demo
    from tokenmask.recipes.config import PretrainConfig
    from tokenmask.recipes.pretrain import corpus_texts, pretrain

    config = PretrainConfig(
        output=str(args.output),
        corpus=tuple(args.corpus),
        tokenizer=args.tokenizer,
        seed=args.seed,
        masking=_masking_keywords(args),
        resume=args.resume,
        overwrite=args.overwrite,
        **{name: getattr(args, name) for name in _PRETRAIN_FLAGS},
    )
    with ProgressReporter() as reporter:
        result = pretrain(config, reporter, command=args.command_line)
    if not reporter.shown:  # another process of a distributed run: the main one reports
        return 0
    print(
        f"trained {result.steps:,} steps on {result.tokens:,} tokens in {result.seconds / 60:.1f} min; "
        f"model in {result.output}/model; metrics in {result.output}/metrics.jsonl and metrics.png"
    )
    if not args.no_demo:
        from tokenmask.blocks.build import held_out_lines

        print_fill_demo(Path(result.output) / "model", held_out_lines(corpus_texts(config), config.validation_share, 6))
    return 0


_FINETUNE_FLAGS = (
    "model", "task", "text_column", "label_column", "group_by", "validation_share", "max_length", "batch_size",
    "grad_accum", "lr", "weight_decay", "warmup", "schedule", "epochs", "max_steps", "max_time", "max_tokens",
    "eval_every", "save_every", "keep_last", "patience", "best_metric", "augment_rate", "augment_strategy", "augment_adaptive",
    "seed", "precision", "cpu", "max_bad_steps",
)
DEFAULT_FINETUNE_MINUTES = 9.0
"""``tokenmask finetune`` without --epochs, --max-steps, --max-time or --max-tokens: fits 10 minutes."""


def _add_finetune_arguments(parser: argparse.ArgumentParser) -> None:
    """DATA, --eval and one flag per FinetuneConfig field, help text from the field docs."""
    from tokenmask.recipes.config import FINETUNE_METRICS, FINETUNE_TASKS, FinetuneConfig

    docs = {f.name: f for f in fields(FinetuneConfig)}
    parser.add_argument("data", nargs="*", help=docs["data"].metadata["help"])
    parser.add_argument("--eval", nargs="+", metavar="DATA", help=docs["eval_data"].metadata["help"])
    parser.add_argument("--output", type=Path, help="output folder (the model ends in OUTPUT/model); required here or in --config")
    parser.add_argument("--config", type=Path, help="YAML file of settings (flag names as keys); flags override it")
    parser.add_argument("--overwrite", action="store_true", help=docs["overwrite"].metadata["help"])
    choices = {
        "task": FINETUNE_TASKS, "schedule": ("linear", "cosine"), "precision": ("auto", "fp32", "bf16"),
        "augment_strategy": ("token", "whole_word"),
        "best_metric": tuple(dict.fromkeys(m for names in FINETUNE_METRICS.values() for m in names)),
    }  # fmt: skip
    group = parser.add_argument_group("fine-tuning")
    for name in _FINETUNE_FLAGS:
        f = docs[name]
        flag, default = f"--{name.replace('_', '-')}", f.default
        shown = f"{DEFAULT_FINETUNE_MINUTES:g} when no other limit is given" if name == "max_time" else default
        help_text = f.metadata["help"] + ("" if shown is None or shown is False else f" (default: {shown})")
        if isinstance(default, bool):
            group.add_argument(flag, action="store_true", help=help_text)
            continue
        kind = float if "float" in f.type else int if "int" in f.type else str
        group.add_argument(flag, type=kind, default=default, choices=choices.get(name), help=help_text)


def _finetune_config(args: argparse.Namespace, **settings: Any):
    from tokenmask.recipes.config import FinetuneConfig

    return FinetuneConfig(
        output=str(args.output),
        data=tuple(args.data),
        eval_data=tuple(args.eval or ()),
        overwrite=args.overwrite,
        **{name: getattr(args, name) for name in _FINETUNE_FLAGS if name not in settings},
        **settings,
    )


def _cmd_finetune(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.recipes.finetune import BEST_FOLDER, CONFUSION_FILE, RESULTS_FILE, finetune
    from tokenmask.use.metrics import format_confusion

    limits = (args.epochs, args.max_steps, args.max_time, args.max_tokens)
    minutes = DEFAULT_FINETUNE_MINUTES if all(limit is None for limit in limits) else args.max_time
    config = _finetune_config(args, resume=args.resume, max_time=minutes)
    with ProgressReporter() as reporter:
        result = finetune(config, reporter, command=args.command_line)
    if not reporter.shown:  # another process of a distributed run: the main one reports
        return 0
    final = result.final.metrics()
    shown = ", ".join(f"{name} {value:.4f}" for name, value in final.items())
    print(f"fine-tuned {result.steps:,} steps in {result.seconds / 60:.1f} min; validation at step {result.final_step}: {shown}")
    print(f"best {result.metric} {result.best[result.metric]:.4f} at step {result.best_step} (model in {result.output}/{BEST_FOLDER})")
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


def _cmd_compare_augment(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.recipes.compare import COMPARE_FILE, COMPARE_PLOT, compare_augment

    config, rates = _finetune_config(args), _rates(args.rates)
    with ProgressReporter() as reporter:
        comparison = compare_augment(config, rates=rates, seeds=args.seeds, reporter=reporter, command=args.command_line)
    print(comparison.table())
    print(f"runs in {comparison.output}/rate-*/seed-*; summary in {comparison.output}/{COMPARE_FILE} and {COMPARE_PLOT}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.recipes.config import PretrainConfig
    from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm, pseudo_perplexity
    from tokenmask.train.models import load_model, paired_tokenizer
    from tokenmask.recipes.pretrain import load_blocks

    tokenizer = paired_tokenizer(args.model, args.tokenizer)
    model = load_model(args.model, vocab_size=len(tokenizer), max_length=args.max_length)
    # the blocks (and split) a pre-training run with the same corpus and settings uses
    corpus = PretrainConfig(
        output="", corpus=tuple(args.corpus), max_length=args.max_length, max_steps=1,
        document_unit=args.document_unit, text_field=args.text_field,
    )  # fmt: skip
    blocks = load_blocks(corpus, tokenizer)
    collator = MaskingCollator(tokenizer, seed=args.seed + EVAL_SEED_OFFSET, **_masking_keywords(args))
    data = blocks.validation if not args.corpus else blocks.train + blocks.validation
    metrics = evaluate_mlm(model, data[: args.max_blocks], collator, batch_size=32)
    pseudo = None
    if args.pseudo_perplexity:
        pseudo = pseudo_perplexity(model, data[: args.max_blocks], tokenizer, max_tokens=args.max_tokens)
    if args.json:
        report = {"model": str(args.model), "blocks": min(len(data), args.max_blocks), **metrics.as_dict()}
        print(json.dumps({**report, **(pseudo.as_dict() if pseudo else {})}, indent=2))
        return 0
    print(
        f"{metrics.targets:,} masked tokens in {min(len(data), args.max_blocks):,} blocks: loss {metrics.loss:.4f}, "
        f"perplexity {metrics.perplexity:.2f}, accuracy {metrics.accuracy:.4f}"
    )
    if pseudo:
        print(
            f"pseudo-perplexity {pseudo.pseudo_perplexity:.2f} over {pseudo.scored_tokens:,} tokens masked one at a time "
            f"(pseudo-log-likelihood {pseudo.pseudo_log_likelihood:.1f} nats)"
        )
    return 0


def _cmd_fill(args: argparse.Namespace) -> int:
    from tokenmask.use.fill import fill_mask, load_fill_mask

    predictions = fill_mask(load_fill_mask(args.model), " ".join(args.text), top_k=args.top_k)
    if args.json:
        print(json.dumps({"text": " ".join(args.text), "predictions": predictions}, indent=2))
    else:
        for number, per_mask in enumerate(predictions, start=1):
            print(f"mask {number}: " + ", ".join(f"{p['token']} ({p['score']:.3f})" for p in per_mask))
    return 0


def _cmd_embed(args: argparse.Namespace) -> int:
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


def _cmd_search(args: argparse.Namespace) -> int:
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


def _cmd_tokenizer_train(args: argparse.Namespace) -> int:
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


_TEXTS_HELP = "files, folders or globs: one text per line of .txt/.md, the --text-field of .jsonl/.csv/.parquet records"


def _add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and text flags that ``embed`` and ``search`` share (they must agree)."""
    parser.add_argument("model", metavar="MODEL", help="checkpoint folder (e.g. OUTPUT/model of pretrain, any Hugging Face encoder or masked-LM), or minilm")
    parser.add_argument("--text-field", default="text", help="text field / column of JSON, CSV, Parquet records (default: text)")
    parser.add_argument("--max-length", type=int, default=256, help="tokens per text at most, special tokens included; longer texts are cut (default: 256)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenmask",
        description="Correct, fast, deterministic token masking for masked-language-model training.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    mask = commands.add_parser(
        "mask",
        help="show how a text is masked: original vs corrupted tokens, coloured by outcome",
        description="Mask a text and show original and corrupted tokens side by side. "
        "Without TEXT or --file, masks a few bundled lines of Shakespeare.",
    )
    mask.add_argument("text", nargs="*", metavar="TEXT", help="text to mask")
    mask.add_argument("--file", type=Path, help="mask each line of this file (.txt/.md/.jsonl)")
    mask.add_argument("--max-length", type=int, default=128, help="truncate texts to this many tokens (default: 128)")
    mask.add_argument("--json", action="store_true", help="print JSON instead of a coloured view")
    _add_masking_arguments(mask)
    mask.set_defaults(run=_cmd_mask)

    stats = commands.add_parser(
        "stats",
        help="measure a masking configuration on a corpus, with binomial confidence intervals",
        description="Mask a corpus and measure the selected share, the mask/random/keep split, "
        "unit lengths and special tokens hit (must be 0), each with a 99%% Wilson interval "
        "against the configured value. Without CORPUS, uses the bundled Shakespeare plays (one "
        "document per scene). "
        "Exit code 1 if a special token was selected or a protected id drawn.",
    )
    stats.add_argument("corpus", nargs="*", help="files, folders or globs (.txt/.md: one text per line; .jsonl: --text-field)")
    stats.add_argument("--text-field", default="text", help="JSON Lines field holding the text (default: text)")
    stats.add_argument("--max-length", type=int, default=128, help="block length in tokens (default: 128)")
    stats.add_argument(
        "--pack",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pack texts into full blocks as in pre-training (default); --no-pack masks each text "
        "alone, truncated to --max-length",
    )
    stats.add_argument("--batch-size", type=int, default=256, help="examples per batch (default: 256)")
    stats.add_argument("--max-tokens", type=int, default=200_000, help="stop after this many tokens (default: 200000)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    _add_masking_arguments(stats)
    stats.set_defaults(run=_cmd_stats)

    pretrain = commands.add_parser(
        "pretrain",
        help="pre-train a masked-LM (default: bert-tiny on the bundled Shakespeare, ~10 min on 2 cores)",
        description="Pre-train a masked-language model with tokenmask's masking and a sparse "
        "prediction head, evaluating at fixed masks; then show fill-mask predictions for held-out "
        "lines. Without CORPUS, trains on the bundled Shakespeare plays.",
    )
    pretrain.add_argument("corpus", nargs="*", help="files, folders or globs: .txt/.md (--document-unit), .jsonl/.json/.csv/.parquet (--text-field), save_to_disk folders; none = the bundled Shakespeare")
    pretrain.add_argument("--output", type=Path, help="output folder (the model ends in OUTPUT/model); required here or in --config")
    pretrain.add_argument("--config", type=Path, help="YAML file of settings (flag names as keys); flags override it")
    pretrain.add_argument("--no-demo", action="store_true", help="skip the fill-mask demo at the end")
    pretrain.add_argument("--resume", action="store_true", help="continue the run in OUTPUT from its newest valid checkpoint (from the start if it has none)")
    pretrain.add_argument("--overwrite", action="store_true", help="start afresh in an OUTPUT that already holds a run")
    _add_pretrain_arguments(pretrain)
    _add_masking_arguments(pretrain)
    pretrain.set_defaults(run=_cmd_pretrain, parser=pretrain)

    evaluate = commands.add_parser(
        "evaluate",
        help="masked-token loss, perplexity and accuracy of a checkpoint, at fixed masks; pseudo-perplexity",
        description="Evaluate a masked-LM checkpoint folder at fixed masks. Without CORPUS, on the "
        "held-out documents of the bundled Shakespeare. With --pseudo-perplexity, also the "
        "pseudo-perplexity of Salazar et al. (2020): each token masked alone, exp(-mean log-prob).",
    )
    evaluate.add_argument("model", type=Path, help="checkpoint folder (e.g. OUTPUT/model of pretrain), or minilm")
    evaluate.add_argument("corpus", nargs="*", help="files, folders or globs")
    evaluate.add_argument("--max-length", type=int, default=128, help="block length (default: 128)")
    evaluate.add_argument("--max-blocks", type=int, default=512, help="evaluate on at most this many blocks (default: 512)")
    evaluate.add_argument(
        "--document-unit", choices=("paragraph", "file", "line"), default="paragraph",
        help="one document per paragraph, file or line of .txt/.md files (default: paragraph)",
    )  # fmt: skip
    evaluate.add_argument("--text-field", default="text", help="text field / column of JSON, CSV, Parquet and datasets (default: text)")
    evaluate.add_argument(
        "--pseudo-perplexity",
        action="store_true",
        help="also score each non-special token masked alone (one forward pass per token; see --max-tokens)",
    )
    evaluate.add_argument(
        "--max-tokens",
        type=int,
        default=2048,
        help="with --pseudo-perplexity: score at most this many tokens, the first of the first blocks (default: 2048)",
    )
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    _add_masking_arguments(evaluate)
    evaluate.set_defaults(run=_cmd_evaluate)

    fill = commands.add_parser("fill", help="fill-mask predictions of a checkpoint", description="Predict the words behind [MASK] (or <mask>).")
    fill.add_argument("model", type=Path, help="checkpoint folder")
    fill.add_argument("text", nargs="+", help="text with [MASK] or <mask>")
    fill.add_argument("--top-k", type=int, default=5, help="predictions per mask (default: 5)")
    fill.add_argument("--json", action="store_true", help="print JSON")
    fill.set_defaults(run=_cmd_fill)

    embed = commands.add_parser(
        "embed",
        help="sentence embeddings of a text file into a .npy matrix (one row per text)",
        description="Embed each text with a checkpoint's encoder (the masked-LM head is not used): the mean "
        "of its last hidden states over the tokens that are neither special nor padding, scaled to unit "
        "length unless --no-normalize. Rows follow the input order; blank lines are skipped. Saves a "
        "float32 .npy matrix (texts x hidden size) for `tokenmask search`.",
    )
    _add_encoder_arguments(embed)
    embed.add_argument("--input", nargs="+", required=True, metavar="FILE", help=_TEXTS_HELP)
    embed.add_argument("--output", type=Path, required=True, help="the .npy file to write (exactly this name)")
    embed.add_argument("--batch-size", type=int, default=32, help="texts per forward pass; texts are sorted by length so batches pad little (default: 32)")
    embed.add_argument(
        "--normalize", action=argparse.BooleanOptionalAction, default=True,
        help="scale each vector to unit L2 norm, so a dot product is the cosine similarity, as retrieval "
        "and vector stores expect (default: on); --no-normalize keeps the plain means",
    )  # fmt: skip
    embed.set_defaults(run=_cmd_embed)

    search = commands.add_parser(
        "search",
        help="the texts most similar to a query, by cosine similarity over an index from `embed`",
        description="Embed QUERY with MODEL and rank the texts of an index built by `tokenmask embed` "
        "(same model, same texts) by cosine similarity; prints rank, score and text.",
    )
    _add_encoder_arguments(search)
    search.add_argument("--index", type=Path, required=True, help="the .npy file written by `tokenmask embed`")
    search.add_argument("--texts", nargs="+", required=True, metavar="FILE", help=f"the input of `embed`: {_TEXTS_HELP}")
    search.add_argument("--query", required=True, help="the text to look for")
    search.add_argument("--top-k", type=int, default=5, help="results to show (default: 5)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(run=_cmd_search)

    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a classifier or token tagger (default: minilm on Rotten Tomatoes reviews, ~10 min on 2 cores)",
        description="Fine-tune a checkpoint (minilm, or OUTPUT/model of pretrain) to classify texts or tag words, "
        "optionally with [MASK] augmentation that keeps the labels. Evaluates on held-out examples (split by "
        "--group-by when given), keeps the best checkpoint in OUTPUT/best, warns when validation loss rises "
        "while training loss falls, and writes OUTPUT/results.json and a confusion matrix. Without DATA, "
        "fine-tunes on the built-in Rotten Tomatoes snippets (fresh / rotten), validated on held-out movies.",
    )
    finetune.add_argument("--resume", action="store_true", help="continue the run in OUTPUT from its newest valid checkpoint (from the start if it has none)")
    _add_finetune_arguments(finetune)
    finetune.set_defaults(run=_cmd_finetune, parser=finetune)

    compare = commands.add_parser(
        "compare-augment",
        help="fine-tune at several [MASK] augmentation rates and seeds; mean ± std per rate, and a plot",
        description="Run the same fine-tuning once per augmentation rate and seed (each in OUTPUT/rate-R/seed-S) "
        "and compare the final validation metric (--best-metric, default macro_f1 or span_f1): mean ± sample "
        "standard deviation per rate, printed and plotted to OUTPUT/compare.png. Give the length of each run "
        "with --max-time (minutes per run), --max-steps or --epochs.",
    )
    compare.add_argument("--rates", default="0,0.05,0.1,0.2", help="comma-separated augmentation rates (default: 0,0.05,0.1,0.2)")
    compare.add_argument("--seeds", type=int, default=3, help="runs per rate, seeds --seed, --seed + 1, … (default: 3)")
    _add_finetune_arguments(compare)
    compare.set_defaults(run=_cmd_compare_augment, parser=compare)

    tokenizer = commands.add_parser("tokenizer", help="tokenizer tools", description="Tokenizer tools.")
    tokenizer_commands = tokenizer.add_subparsers(dest="tokenizer_command", required=True, metavar="COMMAND")
    train = tokenizer_commands.add_parser(
        "train",
        help="train a tokenizer on a corpus and save it as a Hugging Face tokenizer folder",
        description="Train a WordPiece, byte-level BPE or Unigram (SentencePiece-style) tokenizer with "
        "[CLS]/[SEP]/[MASK] special tokens. Without CORPUS, on the bundled Shakespeare.",
    )
    train.add_argument("corpus", nargs="*", help="files, folders or globs (.txt/.md: one text per line; .jsonl)")
    train.add_argument("--output", type=Path, required=True, help="folder to save the tokenizer in")
    train.add_argument("--kind", choices=("wordpiece", "bpe", "unigram"), default="wordpiece", help="model (default: wordpiece)")
    train.add_argument("--vocab-size", type=int, default=8000, help="vocabulary size (default: 8000)")
    train.set_defaults(run=_cmd_tokenizer_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    # transformers' per-load "Loading weights" bars would bury our own output; a user's setting wins
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.command_line = shlex.join(["tokenmask", *argv])  # as typed, for the model cards
    try:
        if getattr(args, "config", None) is not None:
            apply_config_file(args, args.parser, argv)
        if args.command in ("pretrain", "finetune", "compare-augment") and args.output is None:
            raise ValueError("--output is required (on the command line or in --config)")
        for name in ("max_length", "batch_size", "max_tokens", "top_k", "max_blocks"):
            if getattr(args, name, 1) is not None and getattr(args, name, 1) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        return args.run(args)
    except (ValueError, OSError, UnicodeError) as error:
        print(f"tokenmask {args.command}: error: {error}", file=sys.stderr)
        return 2
    except pickle.UnpicklingError as error:  # torch.load(weights_only=True) met more than tensors
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"tokenmask {args.command}: error: refused to unpickle a file holding more than tensors ({first})", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(f"tokenmask {args.command}: stopped: {stop}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
