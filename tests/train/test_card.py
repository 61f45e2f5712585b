"""The model card's layout: front matter the Hub reads, the facts, the numbers, loading code that runs."""

from __future__ import annotations

import yaml

from tokenmask.train.card import model_card

FACTS = dict(
    start="a new bert-tiny (random weights)", data="c.txt: 12 training and 1 validation blocks of 32 tokens", steps=1234,
    tokens=56789, evaluation="At step 1,234, on 1 validation block", path="runs/a/model",
)  # fmt: skip


def test_the_front_matter_is_yaml_the_hub_reads():
    card = model_card(
        pipeline_tag="fill-mask", command="tokenmask pretrain c.txt --output runs/a", metrics={"loss": 1.0}, **FACTS
    )
    head, body = card.split("---\n")[1:3]
    assert yaml.safe_load(head) == {
        "library_name": "transformers", "pipeline_tag": "fill-mask", "tags": ["tokenmask", "masked-language-modeling"],
    }  # fmt: skip
    assert "```bash\ntokenmask pretrain c.txt --output runs/a\n```" in body
    assert "- 1,234 optimizer steps on 56,789 training tokens" in body and "- data: c.txt: 12 training" in body


def test_metrics_are_a_table_with_four_decimals():
    card = model_card(
        pipeline_tag="fill-mask", command=None, metrics={"loss": 4.63125, "accuracy": 0.26, "targets": 2454}, **FACTS
    )
    assert "| metric | value |\n|---|---|\n| loss | 4.6312 |\n| accuracy | 0.2600 |\n| targets | 2,454 |\n" in card
    assert "Trained through the Python API of tokenmask." in card  # no command line


def test_a_builtin_checkpoint_with_a_hub_id_is_the_base_model():
    card = model_card(pipeline_tag="text-classification", command=None, metrics={}, base_model="minilm", **FACTS)
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["tags"] == ["tokenmask", "text-classification"]
    local = model_card(pipeline_tag="text-classification", command=None, metrics={}, base_model="runs/a/model", **FACTS)
    assert "base_model" not in yaml.safe_load(local.split("---\n")[1])  # the Hub takes Hub ids only


def test_the_loading_code_is_python_for_each_pipeline():
    for tag, auto in (
        ("fill-mask", "AutoModelForMaskedLM"),
        ("text-classification", "AutoModelForSequenceClassification"),
        ("token-classification", "AutoModelForTokenClassification"),
    ):
        card = model_card(pipeline_tag=tag, command=None, metrics={}, **{**FACTS, "path": 'C:\\runs\\"a"'})
        code = card.split("```python\n")[1].split("```")[0]
        compile(code, "card", "exec")  # a path with quotes and backslashes stays one string
        assert f"model = {auto}.from_pretrained(path)" in code and f'pipeline("{tag}", model=path)' in code
