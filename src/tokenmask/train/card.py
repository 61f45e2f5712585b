"""The model card: the ``README.md`` of a final model folder (``OUTPUT/model``, fine-tuning's ``OUTPUT/best``).

Hugging Face's card format, written as plain text: YAML front matter that the Hub reads
(library, pipeline tag, tags), then markdown for people: how the model was made (command,
data, steps, tokens), how it scored, and how to load it. The recipes know the facts; this
module only lays them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

PipelineTag = Literal[
    "fill-mask", "text-classification", "token-classification", "question-answering", "sentence-similarity", "feature-extraction"
]

AUTO_CLASSES: dict[str, str] = {
    "fill-mask": "AutoModelForMaskedLM",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "sentence-similarity": "AutoModel",
    "feature-extraction": "AutoModel",
}
"""The ``transformers`` class that loads a model of each pipeline tag."""

HUB_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
"""Built-in checkpoints that have a Hub id, named as ``base_model`` in the front matter."""


def model_card(
    *,
    pipeline_tag: PipelineTag,
    command: str | None,
    start: str,
    data: str,
    steps: int,
    tokens: int,
    metrics: Mapping[str, float | int],
    evaluation: str,
    path: str,
    base_model: str | None = None,
    from_hub: bool = False,
    about: str = "",
) -> str:
    """The text of a model card.

    Args:
        pipeline_tag: what the model does, as the Hub names it.
        command: the command line that produced the run, as typed; None for the Python API.
        start: what training started from, e.g. ``"a new modernbert-tiny (random weights)"``.
        data: the training data, e.g. ``"corpus.txt: 1,234 training blocks of 128 tokens"``.
        steps: optimizer steps trained.
        tokens: training tokens seen (padding excluded).
        metrics: the evaluation's numbers, e.g. ``{"loss": 4.63, "perplexity": 102.5, ...}``;
            floats are shown with 4 decimals, integers with thousands separators.
        evaluation: what the metrics were measured on, e.g. ``"203 validation blocks at fixed masks"``.
        path: where the folder is (the loading example uses it).
        base_model: a checkpoint name; one with a Hub id (``minilm``) is named in the front matter.
        from_hub: ``base_model`` is itself a Hub id (named in the front matter as it is).
        about: a paragraph under the title, e.g. which part of a run the folder is.

    ``model_card(pipeline_tag="fill-mask", command=None, metrics={"loss": 4.6312}, ...)`` starts
    ``---\\nlibrary_name: transformers\\npipeline_tag: fill-mask\\n...`` and holds ``| loss | 4.6312 |``.
    """
    front = ["---", "library_name: transformers", f"pipeline_tag: {pipeline_tag}", "tags:", "- tokenmask"]
    front.append("- masked-language-modeling" if pipeline_tag == "fill-mask" else f"- {pipeline_tag}")
    hub_id = base_model if from_hub else HUB_IDS.get(base_model or "")
    if hub_id:
        front.append(f"base_model: {hub_id}")
    front.append("---")
    made = f"```bash\n{command}\n```" if command else "Trained through the Python API of tokenmask."
    rows = "\n".join(f"| {name} | {_number(value)} |" for name, value in metrics.items())
    text = [
        "\n".join(front),
        f"# A {_KINDS[pipeline_tag]} trained with tokenmask" + (f"\n\n{about}" if about else ""),
        f"## How it was made\n\n{made}\n\n- started from {start}\n- data: {data}\n"
        f"- {steps:,} optimizer steps on {tokens:,} training tokens",
        f"## Evaluation\n\n{evaluation}:\n\n| metric | value |\n|---|---|\n{rows}",
        f"## How to use it\n\n```python\n{_usage(pipeline_tag, path)}\n```",
    ]
    return "\n\n".join(text) + "\n"


_KINDS = {
    "fill-mask": "masked language model",
    "text-classification": "text classifier",
    "token-classification": "token classifier",
    "question-answering": "question-answering model (extractive: a span of the context)",
    "sentence-similarity": "sentence-embedding model (for retrieval)",
    "feature-extraction": "replaced-token discriminator",
}


def _usage(pipeline_tag: PipelineTag, path: str) -> str:
    auto = AUTO_CLASSES[pipeline_tag]
    if pipeline_tag == "feature-extraction":  # a discriminator: an encoder to fine-tune
        return (
            f"from transformers import {auto}, AutoModelForSequenceClassification, AutoTokenizer\n\n"
            f"path = {path!r}  # this folder, or its Hub id once pushed\n"
            f"encoder = {auto}.from_pretrained(path)\n"
            "classifier = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)  # a new head: fine-tune it\n"
            "tokenizer = AutoTokenizer.from_pretrained(path)"
        )
    if pipeline_tag == "sentence-similarity":
        return (
            "from sentence_transformers import SentenceTransformer\n\n"
            f"path = {path!r}  # this folder, or its Hub id once pushed\n"
            "model = SentenceTransformer(path)  # mean pooling, as trained\n"
            'vectors = model.encode(["Who wrote Hamlet?", "Hamlet is a tragedy by William Shakespeare."])\n'
            "# or on the command line: tokenmask embed PATH ... and tokenmask search PATH ..."
        )
    if pipeline_tag == "question-answering":  # transformers 5 has no question-answering pipeline
        return (
            f"from transformers import {auto}, AutoTokenizer\n"
            "from tokenmask.use.answers import answer_question\n\n"
            f"path = {path!r}  # this folder, or its Hub id once pushed\n"
            f"model = {auto}.from_pretrained(path)\n"
            "tokenizer = AutoTokenizer.from_pretrained(path)\n"
            'answer_question(path, "Who wrote Hamlet?", "Hamlet is a tragedy by William Shakespeare.")\n'
            "# or on the command line: tokenmask answer PATH --question ... --context ..."
        )
    if pipeline_tag == "fill-mask":
        example = 'fill(f"To be or not to be, that is the {fill.tokenizer.mask_token}.")'
        name = "fill"
    else:
        example = 'label("The film was a delight.")' if pipeline_tag == "text-classification" else 'label("Anna visited Paris.")'
        name = "label"
    return (
        f"from transformers import {auto}, AutoTokenizer, pipeline\n\n"
        f"path = {path!r}  # this folder, or its Hub id once pushed\n"
        f"model = {auto}.from_pretrained(path)\n"
        "tokenizer = AutoTokenizer.from_pretrained(path)\n"
        f'{name} = pipeline("{pipeline_tag}", model=path)\n'
        f"{example}"
    )


def _number(value: float | int) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.4f}"
