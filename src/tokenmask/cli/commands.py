"""What each command does: build its config from the settings given, make one library call, print the result.

The settings of a config come from :func:`tokenmask.cli.flags.config_from` (defaults <
``--config`` file < flags). Every library call here is one a Python user can make too; what is
left is rendering (:mod:`tokenmask.cli.render`). Heavy imports happen inside the commands, so
``tokenmask --help`` stays instant.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tokenmask.cli.flags import config_from, requested_settings
from tokenmask.cli.options import Demo, JsonOutput, ReplayFile


def _config_file(args: argparse.Namespace) -> Path | None:
    """``--config``: the YAML file of settings to replay, or None."""
    given = config_from(ReplayFile, args).config
    return Path(given) if given else None


def _json(args: argparse.Namespace) -> bool:
    """``--json``: print JSON instead of tables and text."""
    return bool(config_from(JsonOutput, args).json)


def cmd_mask(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import print_masked
    from tokenmask.use.config import MaskPreviewConfig
    from tokenmask.use.preview import preview_masking

    config = config_from(MaskPreviewConfig, args)
    examples = preview_masking(config)
    if _json(args):
        print(json.dumps({"settings": _shown_settings(config), "examples": examples}, ensure_ascii=False, indent=2))
    else:
        print_masked(examples)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from tokenmask.cli.render import print_audit
    from tokenmask.use.config import AuditConfig
    from tokenmask.use.preview import audit_corpus

    config = config_from(AuditConfig, args)
    with Progress(transient=True, disable=_json(args)) as progress:
        task = progress.add_task("masking", total=config.max_tokens)
        audit = audit_corpus(config, on_batch=lambda n: progress.advance(task, n))
    if _json(args):
        print(json.dumps({"settings": _shown_settings(config), **audit.to_dict()}, indent=2))
    else:
        print_audit(audit)
    return 0 if audit.special_targets == 0 and audit.protected_draws == 0 else 1


def cmd_pmi(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import print_pmi
    from tokenmask.use.config import PmiTableConfig
    from tokenmask.use.preview import pmi_table

    config = config_from(PmiTableConfig, args)
    vocabulary = pmi_table(config)
    if _json(args):
        data = vocabulary.to_json()
        shown = {**data, "entries": data["entries"][: config.top], "cache": vocabulary.cache}
        print(json.dumps(shown, ensure_ascii=False, indent=2))
    else:
        print_pmi(vocabulary, top=config.top)
    return 0


def cmd_terms(args: argparse.Namespace) -> int:
    from tokenmask.cli.options import ShownRows
    from tokenmask.cli.render import print_terms, progress_bar
    from tokenmask.use.config import TermsConfig
    from tokenmask.use.preview import find_terms

    config, show = config_from(TermsConfig, args), config_from(ShownRows, args).show  # every setting checked before the work
    with progress_bar("reading") as progress:
        table = find_terms(config, progress=progress)
    path = table.write(config.output)
    if _json(args):
        print(json.dumps({**table.to_json(), "output": str(path)}, ensure_ascii=False, indent=2))
    else:
        print_terms(table, path, show=show)
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter, print_fill_demo
    from tokenmask.recipes.config import PretrainConfig, pretrain_config
    from tokenmask.recipes.pretrain import demo_fill_mask, demo_lines, pretrain

    config = _with_output(pretrain_config(requested_settings(PretrainConfig, args, config_file=_config_file(args))))
    with ProgressReporter() as reporter:
        result = pretrain(config, reporter, command=args.command_line)
    if not reporter.shown:  # another process of a distributed run: the main one reports
        return 0
    print(
        f"trained {result.steps:,} steps on {result.tokens:,} tokens in {result.seconds / 60:.1f} min; "
        f"model in {result.output}/model{' (the discriminator; the generator in generator)' * (config.objective == 'rtd')}; "
        f"metrics in {result.output}/metrics.jsonl and metrics.png"
    )
    if not config_from(Demo, args).no_demo:
        print_fill_demo(demo_fill_mask(config, result.output), demo_lines(config))
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.recipes.config import FinetuneConfig
    from tokenmask.recipes.finetune import BEST_FOLDER, CONFUSION_FILE, RESULTS_FILE, finetune
    from tokenmask.use.classifier_scores import Evaluation
    from tokenmask.use.metrics import format_confusion

    config = _with_output(config_from(FinetuneConfig, args, config_file=_config_file(args)))
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
    if isinstance(result.final, Evaluation):
        print(f"confusion matrix (validation, step {result.final_step}):")
        print(format_confusion(result.final.scores.confusion, result.labels))
    confusion = f" and {CONFUSION_FILE}" if isinstance(result.final, Evaluation) else ""
    print(
        f"model in {result.output}/model; results in {result.output}/{RESULTS_FILE}{confusion}; "
        f"metrics in {result.output}/metrics.jsonl and metrics.png"
    )
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import ProgressReporter
    from tokenmask.experiments.report import REPORT_FILE, study_table
    from tokenmask.experiments.runner import RECORD
    from tokenmask.experiments.study import StudyConfig, run_study, study_config

    config = study_config(requested_settings(StudyConfig, args, config_file=_config_file(args)))
    with ProgressReporter() as reporter:
        study = run_study(config, reporter)
    print(study_table(study))
    print(f"cells in {config.output}/cells; results in {config.output}/{RECORD}; report in {config.output}/{REPORT_FILE}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from tokenmask.use.config import EvaluateConfig
    from tokenmask.use.evaluate import evaluate_checkpoint

    config = config_from(EvaluateConfig, args)
    scores = evaluate_checkpoint(config)
    if _json(args):
        print(json.dumps({"model": config.model, **scores.as_dict()}, indent=2))
        return 0
    metrics, pseudo = scores.metrics, scores.pseudo
    print(
        f"{metrics.targets:,} masked tokens in {scores.blocks:,} blocks: loss {metrics.loss:.4f}, "
        f"perplexity {metrics.perplexity:.2f}, accuracy {metrics.accuracy:.4f}"
    )
    if pseudo:
        print(
            f"pseudo-perplexity {pseudo.pseudo_perplexity:.2f} over {pseudo.scored_tokens:,} tokens masked one at a time "
            f"(pseudo-log-likelihood {pseudo.pseudo_log_likelihood:.1f} nats)"
        )
    return 0


def cmd_fill(args: argparse.Namespace) -> int:
    from tokenmask.use.config import FillConfig
    from tokenmask.use.fill import predict_masks

    config = config_from(FillConfig, args)
    predictions = predict_masks(config)
    if _json(args):
        print(json.dumps({"text": " ".join(config.text), "predictions": predictions}, indent=2))
    else:
        for number, per_mask in enumerate(predictions, start=1):
            print(f"mask {number}: " + ", ".join(f"{p['token']} ({p['score']:.3f})" for p in per_mask))
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    from tokenmask.use.answers import answer_question
    from tokenmask.use.config import AnswerConfig

    config = config_from(AnswerConfig, args)
    found = answer_question(
        config.model, config.question, config.context, max_length=config.max_length, stride=config.doc_stride, hub=config.hub
    )
    if _json(args):
        answer = None if found is None else {"text": found.text, "start": found.start, "score": found.score}
        print(json.dumps({"question": config.question, "answer": answer}, ensure_ascii=False, indent=2))
    elif found is None:
        print("no answer: no span of the context fits (a context of special tokens only?)")
    else:
        print(f"{found.text}  (characters {found.start}-{found.start + len(found.text)}, score {found.score:.2f})")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from tokenmask.cli.render import progress_bar
    from tokenmask.use.config import EmbedConfig
    from tokenmask.use.embed import embed_corpus

    config = config_from(EmbedConfig, args)
    encoder = config.encoder
    with progress_bar("embedding") as progress:
        run = embed_corpus(
            encoder.model, config.input, config.output, text_field=encoder.text_field, batch_size=config.batch_size,
            max_length=encoder.max_length, normalize=config.normalize, progress=progress, hub=encoder.hub,
        )  # fmt: skip
    kind = "unit-length" if run.normalized else "unnormalised"
    print(
        f"embedded {run.texts:,} texts into {kind} {run.dims}-dim vectors in {run.seconds:.1f} s "
        f"({run.texts / max(run.seconds, 1e-9):,.0f} texts/s); saved to {run.output}"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from tokenmask.use.config import SearchConfig
    from tokenmask.use.embed import search_corpus

    config = config_from(SearchConfig, args)
    encoder = config.encoder
    hits = search_corpus(
        encoder.model, config.index, config.texts, config.query,
        top_k=config.top_k, text_field=encoder.text_field, max_length=encoder.max_length, hub=encoder.hub,
    )  # fmt: skip
    if _json(args):
        results = [{"rank": h.rank, "row": h.row, "score": h.score, "text": h.text} for h in hits]
        print(json.dumps({"query": config.query, "model": encoder.model, "results": results}, ensure_ascii=False, indent=2))
    else:
        for hit in hits:
            print(f"{hit.rank:>3}  {hit.score:.4f}  {hit.text}")
    return 0


def cmd_tokenizer_train(args: argparse.Namespace) -> int:
    from tokenmask.use.config import TokenizerTrainingConfig
    from tokenmask.use.tokenizer_training import SAMPLE, train_tokenizer_folder

    config = config_from(TokenizerTrainingConfig, args)
    trained = train_tokenizer_folder(config)
    print(f"{config.kind} tokenizer with {trained.size:,} entries saved to {trained.output}")
    print(f"  {SAMPLE!r} -> {trained.sample_tokens}")
    return 0


def _shown_settings(config: Any) -> dict[str, Any]:
    """The masking settings a ``--json`` result states: the tokenizer, the seed and every masking setting."""
    from tokenmask.settings import flatten

    return {"tokenizer": config.tokenizer.name, "seed": config.seed, **flatten(config.masking)}


def _with_output(config: Any) -> Any:
    if not config.loop.output:
        raise ValueError("--output is required (on the command line or in --config)")
    return config
