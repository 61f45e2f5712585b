"""The ``tokenmask`` command line: one subcommand per verb, flags generated from the configs.

Settings of a config (masking, reading, blocks, the recipes) become flags through
:func:`tokenmask.cli.flags.add_settings`; only what belongs to a command alone (its input
text, ``--json``, ``--no-demo``…) is declared here. Abbreviated flags are refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenmask.cli import commands
from tokenmask.cli.flags import add_settings
from tokenmask.masking.config import MaskingConfig

_TEXTS_HELP = "files, folders or globs: one text per line of .txt/.md, the --text-field of .jsonl/.csv/.parquet records"
_TOKENIZER_HELP = (
    "tokenizer folder, or a built-in name: bert-base-uncased, roberta-gpt2, minilm (default: the model's own for "
    "evaluate, else bert-base-uncased; with a model, it must have the model's vocabulary)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenmask",
        description="Correct, fast, deterministic token masking for masked-language-model training.",
        allow_abbrev=False,
    )
    verbs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_mask, _stats, _pmi, _pretrain, _evaluate, _fill, _embed, _search, _finetune, _compare, _study, _tokenizer):
        add(verbs)
    return parser


def _command(verbs, name: str, run, *, help: str, description: str) -> argparse.ArgumentParser:
    command = verbs.add_parser(name, help=help, description=description, allow_abbrev=False)
    command.set_defaults(run=run)
    return command


def _add_masking(command: argparse.ArgumentParser) -> None:
    """The masking flags, ``--seed`` and ``--tokenizer`` of the commands that mask without training."""
    add_settings(command, MaskingConfig, title="masking")
    command.add_argument("--seed", type=int, default=0, help="random seed of the masks (default: 0)")
    command.add_argument("--tokenizer", help=_TOKENIZER_HELP)


def _config_file(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--config",
        type=Path,
        help="YAML file of settings (flag names as keys, e.g. a run's OUTPUT/config.yaml); flags override it",
    )


def _mask(verbs) -> None:
    mask = _command(
        verbs, "mask", commands.cmd_mask,
        help="show how a text is masked: original vs corrupted tokens, coloured by outcome",
        description="Mask a text and show original and corrupted tokens side by side. "
        "Without TEXT or --file, masks a few bundled lines of Shakespeare.",
    )  # fmt: skip
    mask.add_argument("text", nargs="*", metavar="TEXT", help="text to mask")
    mask.add_argument("--file", type=Path, help="mask each line of this file (.txt/.md/.jsonl)")
    mask.add_argument("--max-length", type=int, default=128, help="truncate texts to this many tokens (default: 128)")
    mask.add_argument("--json", action="store_true", help="print JSON instead of a coloured view")
    _add_masking(mask)


def _stats(verbs) -> None:
    stats = _command(
        verbs, "stats", commands.cmd_stats,
        help="measure a masking configuration on a corpus, with binomial confidence intervals",
        description="Mask a corpus and measure the selected share, the mask/random/keep split, "
        "unit lengths and special tokens hit (must be 0), each with a 99%% Wilson interval "
        "against the configured value. Without CORPUS, uses the bundled Shakespeare plays (one "
        "document per scene). Exit code 1 if a special token was selected or a protected id drawn.",
    )  # fmt: skip
    stats.add_argument("corpus", nargs="*", help="files, folders or globs (.txt/.md: one text per line; .jsonl: --text-field)")
    stats.add_argument("--text-field", default="text", help="JSON Lines field holding the text (default: text)")
    stats.add_argument("--max-length", type=int, default=128, help="block length in tokens (default: 128)")
    stats.add_argument(
        "--pack", action=argparse.BooleanOptionalAction, default=True,
        help="pack texts into full blocks as in pre-training (default); --no-pack masks each text alone, truncated to --max-length",
    )  # fmt: skip
    stats.add_argument("--batch-size", type=int, default=256, help="examples per batch (default: 256)")
    stats.add_argument("--max-tokens", type=int, default=200_000, help="stop after this many tokens (default: 200000)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    _add_masking(stats)


def _pmi(verbs) -> None:
    from tokenmask.blocks.config import BlocksConfig
    from tokenmask.masking.config import UnitConfig
    from tokenmask.text.config import ReadingConfig

    pmi = _command(
        verbs, "pmi", commands.cmd_pmi,
        help="show the PMI vocabulary of a corpus: the word n-grams that strategy pmi masks as units",
        description="Build (or load from the cache) the PMI vocabulary of a corpus, as --strategy pmi uses it: "
        "word n-grams (n = 2..5) ranked by the PMI of Levine et al. (2021), the minimum over the ways to cut "
        "an n-gram of log p(n-gram) / prod p(parts), half bigrams, a quarter trigrams, an eighth each 4- and "
        "5-grams. Without CORPUS, of the bundled Shakespeare plays (one document per scene), as pretrain.",
    )  # fmt: skip
    pmi.add_argument("corpus", nargs="*", help="files, folders or globs (.txt/.md: --document-boundary; .jsonl: --text-field)")
    pmi.add_argument("--top", type=int, default=20, help="n-grams shown per n, best first (default: 20)")
    pmi.add_argument("--json", action="store_true", help="print JSON (the first --top entries)")
    pmi.add_argument("--tokenizer", help=_TOKENIZER_HELP)
    add_settings(pmi, UnitConfig, title="vocabulary", only=frozenset({"pmi_min_count", "pmi_vocab_size"}))
    add_settings(pmi, ReadingConfig, title="reading")
    add_settings(pmi, BlocksConfig, title="cache", only=frozenset({"cache_dir", "no_cache"}))


def _pretrain(verbs) -> None:
    from tokenmask.recipes.config import PretrainConfig

    pretrain = _command(
        verbs, "pretrain", commands.cmd_pretrain,
        help="pre-train a masked-LM (default: modernbert-tiny on the bundled Shakespeare, ~10 min on 2 cores)",
        description="Pre-train a masked-language model with tokenmask's masking and a sparse prediction head, "
        "evaluating at fixed masks; then show fill-mask predictions for held-out lines. Without CORPUS, trains on "
        "the bundled Shakespeare plays. The run writes every resolved setting to OUTPUT/config.yaml: "
        "--config OUTPUT/config.yaml --output OTHER replays it.",
    )  # fmt: skip
    _config_file(pretrain)
    pretrain.add_argument("--no-demo", action="store_true", help="skip the fill-mask demo at the end")
    add_settings(pretrain, PretrainConfig, title="pre-training")


def _evaluate(verbs) -> None:
    from tokenmask.blocks.config import BlocksConfig
    from tokenmask.text.config import ReadingConfig

    evaluate = _command(
        verbs, "evaluate", commands.cmd_evaluate,
        help="masked-token loss, perplexity and accuracy of a checkpoint, at fixed masks; pseudo-perplexity",
        description="Evaluate a masked-LM checkpoint folder at fixed masks. Without CORPUS, on the held-out "
        "documents of the bundled Shakespeare. With --pseudo-perplexity, also the pseudo-perplexity of Salazar "
        "et al. (2020): each token masked alone, exp(-mean log-prob).",
    )  # fmt: skip
    evaluate.add_argument("model", type=Path, help="checkpoint folder (e.g. OUTPUT/model of pretrain), or minilm")
    evaluate.add_argument("corpus", nargs="*", help="files, folders or globs")
    evaluate.add_argument("--max-blocks", type=int, default=512, help="evaluate on at most this many blocks (default: 512)")
    evaluate.add_argument(
        "--pseudo-perplexity", action="store_true",
        help="also score each non-special token masked alone (one forward pass per token; see --max-tokens)",
    )  # fmt: skip
    evaluate.add_argument(
        "--max-tokens", type=int, default=2048,
        help="with --pseudo-perplexity: score at most this many tokens, the first of the first blocks (default: 2048)",
    )  # fmt: skip
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    add_settings(evaluate, ReadingConfig, title="reading")
    add_settings(evaluate, BlocksConfig, title="blocks")
    _add_masking(evaluate)


def _fill(verbs) -> None:
    fill = _command(verbs, "fill", commands.cmd_fill, help="fill-mask predictions of a checkpoint",
                    description="Predict the words behind [MASK] (or <mask>).")  # fmt: skip
    fill.add_argument("model", type=Path, help="checkpoint folder")
    fill.add_argument("text", nargs="+", help="text with [MASK] or <mask>")
    fill.add_argument("--top-k", type=int, default=5, help="predictions per mask (default: 5)")
    fill.add_argument("--json", action="store_true", help="print JSON")


def _encoder_arguments(command: argparse.ArgumentParser) -> None:
    """The model and text flags that ``embed`` and ``search`` share (they must agree)."""
    command.add_argument(
        "model",
        metavar="MODEL",
        help="checkpoint folder (e.g. OUTPUT/model of pretrain, any Hugging Face encoder or masked-LM), or minilm",
    )
    command.add_argument("--text-field", default="text", help="text field / column of JSON, CSV, Parquet records (default: text)")
    command.add_argument(
        "--max-length",
        type=int,
        default=256,
        help="tokens per text at most, special tokens included; longer texts are cut (default: 256)",
    )


def _embed(verbs) -> None:
    embed = _command(
        verbs, "embed", commands.cmd_embed,
        help="sentence embeddings of a text file into a .npy matrix (one row per text)",
        description="Embed each text with a checkpoint's encoder (the masked-LM head is not used): the mean "
        "of its last hidden states over the tokens that are neither special nor padding, scaled to unit "
        "length unless --no-normalize. Rows follow the input order; blank lines are skipped. Saves a "
        "float32 .npy matrix (texts x hidden size) for `tokenmask search`.",
    )  # fmt: skip
    _encoder_arguments(embed)
    embed.add_argument("--input", nargs="+", required=True, metavar="FILE", help=_TEXTS_HELP)
    embed.add_argument("--output", type=Path, required=True, help="the .npy file to write (exactly this name)")
    embed.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="texts per forward pass; texts are sorted by length so batches pad little (default: 32)",
    )
    embed.add_argument(
        "--normalize", action=argparse.BooleanOptionalAction, default=True,
        help="scale each vector to unit L2 norm, so a dot product is the cosine similarity, as retrieval "
        "and vector stores expect (default: on); --no-normalize keeps the plain means",
    )  # fmt: skip


def _search(verbs) -> None:
    search = _command(
        verbs, "search", commands.cmd_search,
        help="the texts most similar to a query, by cosine similarity over an index from `embed`",
        description="Embed QUERY with MODEL and rank the texts of an index built by `tokenmask embed` "
        "(same model, same texts) by cosine similarity; prints rank, score and text.",
    )  # fmt: skip
    _encoder_arguments(search)
    search.add_argument("--index", type=Path, required=True, help="the .npy file written by `tokenmask embed`")
    search.add_argument("--texts", nargs="+", required=True, metavar="FILE", help=f"the input of `embed`: {_TEXTS_HELP}")
    search.add_argument("--query", required=True, help="the text to look for")
    search.add_argument("--top-k", type=int, default=5, help="results to show (default: 5)")
    search.add_argument("--json", action="store_true", help="print JSON")


def _finetune(verbs) -> None:
    from tokenmask.recipes.config import FinetuneConfig

    finetune = _command(
        verbs, "finetune", commands.cmd_finetune,
        help="fine-tune a classifier or token tagger (default: minilm on Rotten Tomatoes reviews, ~10 min on 2 cores)",
        description="Fine-tune a checkpoint (minilm, or OUTPUT/model of pretrain) to classify texts or tag words, "
        "optionally with [MASK] augmentation that keeps the labels. Evaluates on held-out examples (split by "
        "--group-by when given), keeps the best checkpoint in OUTPUT/best, warns when validation loss rises "
        "while training loss falls, and writes OUTPUT/results.json and a confusion matrix. Without DATA, "
        "fine-tunes on the built-in Rotten Tomatoes snippets (fresh / rotten), validated on held-out movies.",
    )  # fmt: skip
    _config_file(finetune)
    add_settings(finetune, FinetuneConfig, title="fine-tuning")


def _compare(verbs) -> None:
    from tokenmask.recipes.config import FinetuneConfig

    compare = _command(
        verbs, "compare-augment", commands.cmd_compare_augment,
        help="fine-tune at several [MASK] augmentation rates, training-set sizes and seeds; tables, plots, report.html",
        description="Run the same fine-tuning once per training-set size, augmentation arm and seed (each in "
        "OUTPUT/size-S/ARM/seed-N; an arm is a fixed rate, rate-R, or with --augment-adaptive also adaptive-R) and "
        "compare the final metrics (accuracy, macro-F1; --best-metric picks the one compared): mean ± sample "
        "standard deviation per arm, and each arm minus rate 0 seed by seed with a 95%% paired t interval that says "
        "when the difference is within noise. Training samples are drawn with the seed, stratified by label, nested "
        "(the 100 are among the 300). With --robustness, also scored on corrupted copies of the validation set. "
        "Writes OUTPUT/compare.json, compare.png, robustness.png and report.html. Give the length of each run with "
        "--max-steps (equal steps), --max-time (equal minutes per run) or --epochs; --resume continues an interrupted "
        "comparison without redoing finished runs.",
    )  # fmt: skip
    compare.add_argument("--rates", default="0,0.05,0.1,0.2", help="comma-separated augmentation rates (default: 0,0.05,0.1,0.2)")
    compare.add_argument("--seeds", type=int, default=3, help="runs per size and arm, seeds --seed, --seed + 1, … (default: 3)")
    compare.add_argument(
        "--train-sizes", default="all",
        help="comma-separated training-set sizes, whole numbers or 'all', e.g. 100,300,1000,all (default: all)",
    )  # fmt: skip
    compare.add_argument(
        "--robustness", action="store_true",
        help="also score every run on corrupted copies of the validation set (default sets: typos in 5/10/20%% of "
        "words, words deleted or replaced by the unknown token at 10/20/30%%; classification only)",
    )  # fmt: skip
    compare.add_argument(
        "--corruptions", nargs="+", metavar="KIND=RATES",
        help="the corrupted sets of --robustness instead of the defaults, KIND one of typo, delete, unk: "
        "e.g. --corruptions typo=0.1,0.2 unk=0.2",
    )  # fmt: skip
    compare.add_argument(
        "--keep-models", action=argparse.BooleanOptionalAction, default=True,
        help="keep each run's model, best and checkpoints folders (default); --no-keep-models removes them once the "
        "run is scored, keeping its results, metrics and plots (minilm: ~175 MB a run)",
    )  # fmt: skip
    _config_file(compare)
    add_settings(compare, FinetuneConfig, title="fine-tuning")


def _study(verbs) -> None:
    from tokenmask.recipes.config import PretrainConfig
    from tokenmask.recipes.study_grid import DEFAULT_CELL_TOKENS, DEFAULT_GRID, GRID_KEYS
    from tokenmask.train.config import LoopConfig

    grid = DEFAULT_GRID
    study = _command(
        verbs, "study", commands.cmd_study,
        help="which masking pays: pre-train a grid of strategies x rates x corruptions, scored on the same masks",
        description="Pre-train one run per cell of the grid (strategies x rates x corruptions [x rate schedules] "
        "x seeds), each in OUTPUT/cells/NAME with the same settings, budget and seeds, and score every cell on "
        "the same fixed token-level 80/10/10 masks (its own-masking score beside). With --finetune, also "
        "fine-tune each cell's model, and the same model untrained, on the built-in Rotten Tomatoes snippets. "
        "Writes OUTPUT/study.json, OUTPUT/report.html and plots; --resume continues a stopped study without "
        f"redoing finished cells. Without a limit, each cell stops at {DEFAULT_CELL_TOKENS:,} training tokens.",
    )  # fmt: skip
    study.add_argument("--strategies", default=",".join(grid.strategies),
                       help=f"comma-separated masking strategies (default: {','.join(grid.strategies)})")  # fmt: skip
    study.add_argument("--rates", default=",".join(f"{r:g}" for r in grid.rates),
                       help=f"comma-separated masking rates (default: {','.join(f'{r:g}' for r in grid.rates)})")  # fmt: skip
    study.add_argument("--corruption", default=",".join(grid.corruptions),
                       help="comma-separated: bert (80/10/10), mask-only (every target [MASK]) (default: bert)")  # fmt: skip
    study.add_argument("--rate-ends", default="none",
                       help="comma-separated rate-schedule ends: none = constant rate, a number = linearly from the cell's "
                       "rate to it (default: none)")  # fmt: skip
    study.add_argument("--seeds", type=int, default=grid.seeds, help="runs per cell, seeds --seed, --seed + 1, … (default: 1)")
    study.add_argument("--jobs", type=int, default=1, help="cells trained at once, each in its own process (default: 1)")
    study.add_argument("--finetune", action="store_true",
                       help="also fine-tune each cell's model and an untrained baseline on the built-in classification data")  # fmt: skip
    study.add_argument(
        "--finetune-max-steps", type=int, default=300, help="with --finetune: steps of each fine-tuning (default: 300)"
    )
    study.add_argument("--finetune-lr", type=float, default=1e-4, help="with --finetune: its learning rate (default: 0.0001)")
    budget = PretrainConfig(loop=LoopConfig(max_tokens=DEFAULT_CELL_TOKENS))  # the defaults a study shows
    add_settings(study, PretrainConfig, title="pre-training (every cell)", defaults=budget, exclude=(*GRID_KEYS, "overwrite"))
    _reword(study, {
        "output": "the study's folder: OUTPUT/study.json, OUTPUT/report.html, each cell's runs in OUTPUT/cells/NAME; required",
        "resume": "continue the study in OUTPUT: finished cells are kept as they are, an interrupted one continues "
                  "from its newest checkpoint, the others start",
        "seed": "the first seed: each cell runs with seeds SEED .. SEED + --seeds - 1 (default: 0)",
        "max_time": "stop each cell after this many minutes, counted across resumes",
    })  # fmt: skip


def _reword(command: argparse.ArgumentParser, helps: dict[str, str]) -> None:
    """Give generated flags the meaning they have in this command (a study's ``--output`` is the study's folder)."""
    for action in command._actions:
        if action.dest in helps:
            action.help = helps[action.dest].replace("%", "%%")


def _tokenizer(verbs) -> None:
    tokenizer = verbs.add_parser("tokenizer", help="tokenizer tools", description="Tokenizer tools.", allow_abbrev=False)
    tools = tokenizer.add_subparsers(dest="tokenizer_command", required=True, metavar="COMMAND")
    train = _command(
        tools, "train", commands.cmd_tokenizer_train,
        help="train a tokenizer on a corpus and save it as a Hugging Face tokenizer folder",
        description="Train a WordPiece, byte-level BPE or Unigram (SentencePiece-style) tokenizer with "
        "[CLS]/[SEP]/[MASK] special tokens. Without CORPUS, on the bundled Shakespeare.",
    )  # fmt: skip
    train.add_argument("corpus", nargs="*", help="files, folders or globs (.txt/.md: one text per line; .jsonl)")
    train.add_argument("--output", type=Path, required=True, help="folder to save the tokenizer in")
    train.add_argument("--kind", choices=("wordpiece", "bpe", "unigram"), default="wordpiece", help="model (default: wordpiece)")
    train.add_argument("--vocab-size", type=int, default=8000, help="vocabulary size (default: 8000)")
