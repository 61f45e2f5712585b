"""The ``tokenmask`` command line: one subcommand per verb, every flag generated from a declared setting.

:data:`COMMANDS` lists the verbs: each names the config its job takes (and the options of the
command line itself: ``--json``, ``--config``), and its flags, their help and defaults come
from those declarations (:func:`tokenmask.cli.flags.add_settings`); the settings reference in
the docs is generated from the same list (:mod:`tokenmask.cli.reference`). A long command's
``--help`` leaves its advanced settings to ``--help-all`` (:data:`SHORT_HELP`). Abbreviated flags
are refused. Building the parser imports the configs, not torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenmask.cli import commands
from tokenmask.cli.flags import add_help_all, add_settings
from tokenmask.cli.options import Demo, JsonOutput, ReplayFile, ShownRows
from tokenmask.experiments.study import StudyConfig
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import leaves
from tokenmask.use.config import (
    AnswerConfig,
    AuditConfig,
    EmbedConfig,
    EvaluateConfig,
    FillConfig,
    MaskPreviewConfig,
    PmiTableConfig,
    SearchConfig,
    TermsConfig,
    TokenizerTrainingConfig,
)


@dataclass(frozen=True)
class Command:
    """A verb of the command line: what it does, and the declared settings it takes.

    Attributes:
        name: ``"pretrain"``, or ``"tokenizer train"`` for a verb under a group.
        run: ``args -> exit code``: builds ``config`` from the settings given, makes one
            library call, prints the result (:mod:`tokenmask.cli.commands`).
        config: the job's settings, all offered as flags (nested configs grouped by their field's help).
        options: the command line's own settings (:mod:`tokenmask.cli.options`).
        title: the heading of ``config``'s top-level flags in ``--help``.
    """

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    description: str
    config: type
    options: tuple[type, ...] = ()
    title: str = "options"


COMMANDS: tuple[Command, ...] = (
    Command(
        "mask", commands.cmd_mask, "show how a text is masked: original vs corrupted tokens, coloured by outcome",
        "Mask a text and show original and corrupted tokens side by side. Without TEXT or --file, masks a few bundled "
        "lines of Shakespeare.",
        MaskPreviewConfig, (JsonOutput,), title="input",
    ),
    Command(
        "stats", commands.cmd_stats, "measure a masking configuration on a corpus, with binomial confidence intervals",
        "Mask a corpus and measure the selected share, the mask/random/keep split, unit lengths and special tokens hit "
        "(must be 0), each with a 99% Wilson interval against the configured value. Without CORPUS, uses the bundled "
        "Shakespeare plays (one document per scene). Exit code 1 if a special token was selected or a protected id drawn.",
        AuditConfig, (JsonOutput,), title="input",
    ),
    Command(
        "pmi", commands.cmd_pmi, "show the PMI vocabulary of a corpus: the word n-grams that strategy pmi masks as units",
        "Build (or load from the cache) the PMI vocabulary of a corpus, as --strategy pmi uses it: word n-grams "
        "(n = 2..5) ranked by the PMI of Levine et al. (2021), the minimum over the ways to cut an n-gram of "
        "log p(n-gram) / prod p(parts), half bigrams, a quarter trigrams, an eighth each 4- and 5-grams. Without "
        "CORPUS, of the bundled Shakespeare plays (one document per scene), as pretrain.",
        PmiTableConfig, (JsonOutput,), title="input",
    ),
    Command(
        "terms", commands.cmd_terms,
        "find a domain's terms: the words and phrases a corpus uses far more often than English; a --mask-terms file",
        "Rank the words and short phrases (the corpus's PMI n-grams) of a corpus by how much more often it uses them "
        "than general English (wordfreq's frequencies, or --background CORPUS): score = log2((f + k) / (b + k)), f and b "
        "per million words of the corpus and the background, k the --smoothing. Terms seen fewer than --min-count times "
        "are left out, and numbers and single characters. Writes the best --top, one per line, to --output: the file "
        "--mask-terms reads. Without CORPUS, of the bundled Shakespeare plays (one document per scene).",
        TermsConfig, (ShownRows, JsonOutput), title="input",
    ),
    Command(
        "pretrain", commands.cmd_pretrain,
        "pre-train a masked-LM (default: modernbert-tiny on the bundled Shakespeare, ~10 min on 2 cores)",
        "Pre-train a masked-language model with tokenmask's masking and a sparse prediction head, evaluating at fixed "
        "masks; then show fill-mask predictions for held-out lines. Without CORPUS, trains on the bundled Shakespeare "
        "plays. The run writes every resolved setting to OUTPUT/config.yaml: --config OUTPUT/config.yaml --output "
        "OTHER replays it.",
        PretrainConfig, (ReplayFile, Demo), title="pre-training",
    ),
    Command(
        "evaluate", commands.cmd_evaluate,
        "masked-token loss, perplexity and accuracy of a checkpoint, at fixed masks; pseudo-perplexity",
        "Evaluate a masked-LM checkpoint folder at fixed masks. Without CORPUS, on the held-out documents of the "
        "bundled Shakespeare. With --pseudo-perplexity, also the pseudo-perplexity of Salazar et al. (2020): each "
        "token masked alone, exp(-mean log-prob).",
        EvaluateConfig, (JsonOutput,), title="evaluation",
    ),
    Command(
        "fill", commands.cmd_fill, "fill-mask predictions of a checkpoint", "Predict the words behind [MASK] (or <mask>).",
        FillConfig, (JsonOutput,), title="prediction",
    ),
    Command(
        "answer", commands.cmd_answer, "the answer to a question in a context, by a question-answering checkpoint",
        "Answer QUESTION from CONTEXT with a checkpoint fine-tuned by `finetune --task qa` (or any "
        "AutoModelForQuestionAnswering): the best span over the context's windows, as the fine-tuning's evaluation "
        "reads it (at most 30 tokens; score = start + end logit).",
        AnswerConfig, (JsonOutput,), title="answer",
    ),
    Command(
        "embed", commands.cmd_embed, "sentence embeddings of a text file into a .npy matrix (one row per text)",
        "Embed each text with a checkpoint's encoder (the masked-LM head is not used): the mean of its last hidden "
        "states over the tokens that are neither special nor padding (a sentence-transformers folder, such as "
        "finetune --task retrieval writes: its own pooling), scaled to unit length unless --no-normalize. "
        "Rows follow the input order; blank lines are skipped. Saves a float32 .npy matrix (texts x hidden size) for "
        "`tokenmask search`.",
        EmbedConfig, title="embedding",
    ),
    Command(
        "search", commands.cmd_search, "the texts most similar to a query, by cosine similarity over an index from `embed`",
        "Embed QUERY with MODEL and rank the texts of an index built by `tokenmask embed` (same model, same texts) by "
        "cosine similarity; prints rank, score and text.",
        SearchConfig, (JsonOutput,), title="search",
    ),
    Command(
        "finetune", commands.cmd_finetune,
        "fine-tune a classifier, token tagger or question answerer (default: minilm on Rotten Tomatoes reviews, ~10 min on 2 cores)",
        "Fine-tune a checkpoint (minilm, or OUTPUT/model of pretrain) to classify texts, tag words or answer questions "
        "with a span of a context, optionally with [MASK] augmentation that keeps the labels. Evaluates on held-out "
        "examples (split by --group-by when given), keeps the best checkpoint in OUTPUT/best, warns when validation "
        "loss rises while training loss falls, and writes OUTPUT/results.json (and a classifier's confusion matrix). "
        "Without DATA, fine-tunes on the built-in Rotten Tomatoes snippets (fresh / rotten), validated on held-out "
        "movies; with --task qa, on SQuAD v1.1 (squad), validated on 1,000 of its dev questions.",
        FinetuneConfig, (ReplayFile,), title="fine-tuning",
    ),
    Command(
        "study", commands.cmd_study,
        "which masking pays, on your task: pre-train a grid of maskings, fine-tune every model, compare with paired "
        "intervals",
        "Pre-train one run per cell of the grid (strategies x rates x corruptions [x rate ends x objectives] x seeds), each "
        "in OUTPUT/cells/NAME with the settings of --pretrain-config, every cell scored on the same fixed 80/10/10 masks. "
        "With --finetune DATA, fine-tune every model and the starting model itself (the baseline) with the settings of "
        "--finetune-config at each label budget x augmentation x seed [x pre-training fraction], and compare each with "
        "paired 95% intervals and a verdict column. --strategies none fine-tunes the starting model alone. Writes "
        "OUTPUT/study.json, OUTPUT/report.html and OUTPUT/config.yaml (--config replays it); --resume continues.",
        StudyConfig, (ReplayFile,), title="the study",
    ),
    Command(
        "tokenizer train", commands.cmd_tokenizer_train,
        "train a tokenizer on a corpus and save it as a Hugging Face tokenizer folder",
        "Train a WordPiece, byte-level BPE or Unigram (SentencePiece-style) tokenizer with [CLS]/[SEP]/[MASK] special "
        "tokens. Without CORPUS, on the bundled Shakespeare.",
        TokenizerTrainingConfig, title="tokenizer",
    ),
)  # fmt: skip


SHORT_HELP = 30
"""A command with at most this many settings shows them all on ``--help``; a longer one, all but
the advanced ones (``setting(advanced=True)``), which ``--help-all`` adds."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenmask",
        description="Correct, fast, deterministic token masking for masked-language-model training.",
        allow_abbrev=False,
    )
    verbs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, Any] = {}  # a group's verbs (tokenizer: train)
    for command in COMMANDS:
        *group, name = command.name.split()
        where = verbs
        if group:
            if group[0] not in groups:
                tools = verbs.add_parser(
                    group[0], help=f"{group[0]} tools", description=f"{group[0].title()} tools.", allow_abbrev=False
                )
                groups[group[0]] = tools.add_subparsers(dest=f"{group[0]}_command", required=True, metavar="COMMAND")
            where = groups[group[0]]
        verb = where.add_parser(name, help=command.help, description=command.description, allow_abbrev=False)
        verb.set_defaults(run=command.run)
        brief = sum(1 for config in (command.config, *command.options) for _ in leaves(config)) > SHORT_HELP
        hidden = add_settings(verb, command.config, title=command.title, brief=brief)
        for options in command.options:
            hidden |= add_settings(verb, options, title="command line", brief=brief)
        add_help_all(verb, hidden)
    return parser
