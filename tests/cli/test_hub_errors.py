"""Hub ids on the command line: what goes wrong says so in one line; what goes right is pinned to a commit.

Three parts, all in-process through :func:`tokenmask.cli.main.main` with tiny settings:

- bad names (offline, the session's Hub cache of ``hub_checkpoints.py``): an id not cached, a
  revision that is not there, remote code not trusted, a decoder, ``--revision`` for a folder or
  a built-in name, ``fill`` without a masked-LM head, a name that is no name. Each is one line
  ``tokenmask CMD: error: …`` on stderr, exit code 2, nothing written, and says what to do;
- good names through the cache: ``--revision`` (a tag, a commit) recorded as the commit in
  config.yaml and the model card and replayed from it; a pickle-only repository; the real
  all-MiniLM-L6-v2 by its Hub id; a tokenizer by Hub id; ``embed`` then ``search``;
- the Hub's refusals (not found, private, gated, no such revision), which only an online Hub
  gives: from a fake Hub on 127.0.0.1 answering as huggingface.co does, and from no Hub at all.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from huggingface_hub import constants
from transformers import AutoModelForMaskedLM, AutoTokenizer

from hub_checkpoints import REMOTE_CODE_CANARY, HubCache
from tokenmask.cli.main import main
from tokenmask.hub import HubError, download

TINY = ["--max-length", "32", "--batch-size", "2", "--max-steps", "2", "--report-to", "none", "--cpu", "--precision", "fp32"]
"""Two steps of two 32-token examples, on the CPU in fp32 (bf16 autocast is slower there), no tracker:
what every training command gets."""
PRETRAIN_TINY = [*TINY, "--eval-blocks", "2", "--no-demo"]
"""And pre-training: scored on 2 blocks, no fill-mask demo at the end."""
FINETUNE_TINY = ["--validation-share", "0.1"]
"""And fine-tuning (on 80 reviews): about 8 held out."""

COMMANDS = ("pretrain", "finetune", "evaluate", "fill", "embed")
"""The commands that take a model: pretrain --init, finetune --model, and the three that use one."""


@dataclass(frozen=True)
class Files:
    """A test's inputs, and the two places a command would write to, in a folder of their own (empty before)."""

    corpus: Path
    reviews: Path
    texts: Path
    output: Path
    vectors: Path

    def nothing_written(self) -> bool:
        """Neither the run folder nor the vectors file, nor anything else beside them (a temporary folder…)."""
        return not any(self.output.parent.iterdir())

    def argv(self, command: str, model: str, *extra: str) -> list[str]:
        """``command`` on ``model``, tiny, writing (if at all) to :attr:`output` or :attr:`vectors`."""
        return {
            "pretrain": ["pretrain", str(self.corpus), "--init", model, "--output", str(self.output), *PRETRAIN_TINY],
            "finetune": ["finetune", str(self.reviews), "--model", model, "--output", str(self.output), *TINY, *FINETUNE_TINY],
            "evaluate": ["evaluate", model, str(self.corpus), "--max-length", "32", "--max-blocks", "2"],
            "fill": ["fill", model, "the [MASK] of the play"],
            "embed": ["embed", model, "--input", str(self.texts), "--output", str(self.vectors)],
        }[command] + list(extra)


@pytest.fixture(scope="module")
def corpus(plays_file) -> Path:
    """100 paragraphs of 6 lines of Shakespeare: about 8,000 tokens, 260 blocks of 32."""
    return plays_file(600, 6)


@pytest.fixture(scope="module")
def reviews(tmp_path_factory, reviews_csv) -> Path:
    """The first 80 of the session's labelled reviews: fine-tuning MiniLM scores 7 or so, not 36."""
    path = tmp_path_factory.mktemp("hub-reviews") / "reviews.csv"
    path.write_text("\n".join(reviews_csv.read_text(encoding="utf-8").splitlines()[:81]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def files(corpus, reviews, short_texts, tmp_path) -> Files:
    return Files(corpus, reviews, short_texts, tmp_path / "run", tmp_path / "vectors.npy")


def said(text: str) -> str:
    """What a command printed, white space collapsed (the terminal view wraps long lines)."""
    return " ".join(text.split())


def refused(argv: list[str], files: Files, capsys) -> str:
    """Run ``argv``, expecting the one-line refusal; returns its message (after ``error: ``).

    Exit code 2, no traceback, one line on stderr, and nothing written: neither the run folder
    nor the vectors file, nor anything beside them, exists.
    """
    assert main(argv) == 2
    err = capsys.readouterr().err
    shown = err.splitlines()
    prefix = f"tokenmask {argv[0]}: error: "
    assert len(shown) == 1 and shown[0].startswith(prefix), err
    assert "Traceback" not in err
    assert files.nothing_written()
    return shown[0].removeprefix(prefix)


# ---------------------------------------------------------------------------------------- bad names, offline

BAD_NAMES: dict[str, tuple[Callable[[HubCache], str], tuple[str, ...], tuple[str, ...]]] = {
    # case: (the model, extra flags, words the message must hold)
    "not cached": (
        lambda hub: hub.missing, (),
        ("tokenmask-test/not-in-the-cache is neither a local folder nor in the Hugging Face cache", "HF_HUB_OFFLINE=1",
         "`hf download tokenmask-test/not-in-the-cache`"),
    ),
    "no such revision": (
        lambda hub: hub.families["bert"], ("--revision", "v2"),
        ("revision 'v2' of tokenmask-test/tiny-bert", "HF_HUB_OFFLINE=1", "`hf download tokenmask-test/tiny-bert --revision v2`"),
    ),
    "remote code": (
        lambda hub: hub.remote_code, (),
        ("tokenmask-test/tiny-remote-code", "auto_map", "AutoModelForMaskedLM to modeling_custom.CustomForMaskedLM",
         "--trust-remote-code"),
    ),
    "a decoder": (lambda hub: hub.gpt2, (), ("tokenmask-test/tiny-gpt2 is a gpt2 (GPT2LMHeadModel), not an encoder",)),
    "revision of a folder": (
        lambda hub: str(hub.snapshot(hub.families["bert"])), ("--revision", "v1"),
        ("--revision v1 is for models named by Hub id", "is a local folder"),
    ),
    "revision of minilm": (lambda hub: "minilm", ("--revision", "v1"), ("--revision v1 is for models named by Hub id", "minilm is built in")),
    "no name": (lambda hub: "runs/a/b/c", (), ("'runs/a/b/c' is neither a folder", "minilm", "Hub id (ORG/NAME)")),
}  # fmt: skip
"""Every way a model name can be wrong offline, and what its one line must say."""


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BAD_NAMES)
def test_a_bad_model_name_is_one_line_that_says_what_to_do(case, command, hub_cache, files, capsys, monkeypatch):
    monkeypatch.delenv(REMOTE_CODE_CANARY, raising=False)
    model, extra, words = BAD_NAMES[case]
    message = refused(files.argv(command, model(hub_cache), *extra), files, capsys)
    assert all(word in message for word in words), message
    assert REMOTE_CODE_CANARY not in os.environ  # no repository's code ran, refused or not


@pytest.mark.parametrize(
    ("tokenizer", "extra", "words"),
    [
        pytest.param("tokenmask-test/not-in-the-cache", (), ("HF_HUB_OFFLINE=1", "`hf download tokenmask-test/not-in-the-cache`"), id="not cached"),
        pytest.param("tokenmask-test/tiny-bert", ("--revision", "v2"), ("revision 'v2' of tokenmask-test/tiny-bert",), id="no such revision"),
        pytest.param("FOLDER", ("--revision", "v1"), ("--revision v1 is for Hub ids", "is a local folder"), id="revision of a folder"),
        pytest.param("bert-base-uncased", ("--revision", "v1"), ("--revision v1 is for Hub ids", "bert-base-uncased is built in"), id="revision of a built-in"),
        pytest.param("runs/a/b/c", (), ("tokenizer 'runs/a/b/c' is neither a folder", "Hub id (ORG/NAME)"), id="no name"),
    ],
)  # fmt: skip
def test_a_bad_tokenizer_name_is_one_line_too(tokenizer, extra, words, hub_cache, files, capsys):
    tokenizer = str(hub_cache.snapshot(hub_cache.families["bert"])) if tokenizer == "FOLDER" else tokenizer
    argv = ["pretrain", str(files.corpus), "--preset", "bert-tiny", "--tokenizer", tokenizer, *extra]
    message = refused([*argv, "--output", str(files.output), *PRETRAIN_TINY], files, capsys)
    assert all(word in message for word in words), message


def test_fill_refuses_a_checkpoint_without_a_masked_lm_head(hub_cache, files, capsys):
    """all-MiniLM-L6-v2 is a ``BertModel``: a masked-LM of it has a random head, so its guesses would be noise."""
    message = refused(files.argv("fill", hub_cache.minilm), files, capsys)
    assert "sentence-transformers/all-MiniLM-L6-v2 has no masked-LM head" in message
    assert "tokenmask pretrain --init sentence-transformers/all-MiniLM-L6-v2" in message


def test_embed_leaves_nothing_but_the_error_on_stderr(hub_cache, files, capsys):
    assert main(files.argv("embed", hub_cache.missing)) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


# ---------------------------------------------------------------------------------------- remote code, trusted


@pytest.fixture
def remote_code_unimported(monkeypatch) -> None:
    """The canary unset, and the remote module forgotten, so importing it (running it) sets the canary again.

    transformers imports a repository's module once per process (``transformers_modules.<commit>…``)
    and skips re-running it while its hash is unchanged.
    """
    monkeypatch.delenv(REMOTE_CODE_CANARY, raising=False)
    for name in [name for name in sys.modules if name.startswith("transformers_modules.") and name.endswith(".modeling_custom")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("command", COMMANDS)
def test_trust_remote_code_runs_the_repository_code(command, hub_cache, files, capsys, remote_code_unimported):
    """Past the refusal, the repository's ``modeling_custom.py`` runs (the canary is set).

    Its ``auto_map`` maps AutoConfig and AutoModelForMaskedLM only, so the masked-LM commands run
    to the end, while ``finetune`` (AutoModelForSequenceClassification) and ``embed`` (AutoModel)
    then fail in transformers: :func:`test_remote_code_without_the_class_a_command_needs`.
    """
    code = main(files.argv(command, hub_cache.remote_code, "--trust-remote-code"))
    err = capsys.readouterr().err
    assert os.environ.get(REMOTE_CODE_CANARY) == "1"
    assert "unless you give --trust-remote-code" not in err
    if command in ("finetune", "embed"):
        assert code == 2 and files.nothing_written()
    else:
        assert code == 0, err
        assert command != "pretrain" or (files.output / "model" / "config.json").is_file()


@pytest.mark.parametrize(("command", "auto_class"), [("finetune", "AutoModelForSequenceClassification"), ("embed", "AutoModel")])
def test_remote_code_without_the_class_a_command_needs(command, auto_class, hub_cache, files, capsys, remote_code_unimported):
    message = refused(files.argv(command, hub_cache.remote_code, "--trust-remote-code"), files, capsys)
    assert auto_class in message and "auto_map" in message and len(message) < 400, message[:400]


# ---------------------------------------------------------------------------------------- good names, through the cache


def front_matter(card: Path) -> dict:
    """The YAML between the first two ``---`` lines of a model card."""
    return yaml.safe_load(card.read_text(encoding="utf-8").split("---\n")[1])


def losses(output: Path) -> list[tuple]:
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r.get("loss"), r.get("eval_loss")) for r in records]


@pytest.fixture(scope="module")
def continued(hub_cache, corpus, tmp_path_factory) -> Callable[[str | None], tuple[Path, str]]:
    """``continued(revision)``: (OUTPUT, what it printed) of ``pretrain --init tokenmask-test/tiny-bert
    [--revision REV]``, run once per revision (None: no ``--revision``)."""
    runs: dict[str | None, tuple[Path, str]] = {}

    def run(revision: str | None) -> tuple[Path, str]:
        if revision not in runs:
            out = tmp_path_factory.mktemp("continued") / "run"
            pin = ["--revision", revision] if revision else []
            argv = ["pretrain", str(corpus), "--init", hub_cache.families["bert"], *pin, "--output", str(out), *PRETRAIN_TINY]
            printed = io.StringIO()  # a module's fixture has no capsys: the run's print()s go here
            with contextlib.redirect_stdout(printed):
                assert main(argv) == 0, argv
            runs[revision] = out, said(printed.getvalue())
        return runs[revision]

    return run


@pytest.mark.parametrize("revision", ["v1", "V1-COMMIT"])
def test_a_revision_is_recorded_as_its_commit(revision, hub_cache, continued):
    repo = hub_cache.families["bert"]
    commit = hub_cache.commits[repo]["v1"]
    out, printed = continued(commit if revision == "V1-COMMIT" else revision)
    assert f"continuing {repo} (Hub revision {commit})" in printed
    config = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert (config["init"], config["revision"]) == (repo, commit)  # the commit, not "v1": the tag may move
    card = out / "model" / "README.md"
    assert commit in card.read_text(encoding="utf-8") and front_matter(card)["base_model"] == repo


def test_without_a_revision_main_s_commit_is_recorded(hub_cache, continued):
    repo = hub_cache.families["bert"]
    out, _ = continued(None)
    assert yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))["revision"] == hub_cache.commits[repo]["main"]


def test_the_weights_are_the_revision_s(hub_cache, continued, corpus, capsys):
    """v1 holds other weights (seed 1) than main (seed 0): the run on v1 starts from v1's, and
    ``evaluate`` scores v1 by tag and by commit alike, and main otherwise."""
    repo = hub_cache.families["bert"]

    def query(folder: Path) -> torch.Tensor:
        return AutoModelForMaskedLM.from_pretrained(folder).state_dict()["bert.encoder.layer.0.attention.self.query.weight"]

    trained = query(continued("v1")[0] / "model")
    assert torch.dist(trained, query(hub_cache.snapshot(repo, "v1"))) < torch.dist(trained, query(hub_cache.snapshot(repo))) / 10

    def loss(*pin: str) -> float:
        assert main(["evaluate", repo, str(corpus), "--max-length", "32", "--max-blocks", "2", "--json", *pin]) == 0
        return json.loads(capsys.readouterr().out)["loss"]

    tag, commit, main_loss = loss("--revision", "v1"), loss("--revision", hub_cache.commits[repo]["v1"]), loss()
    assert tag == commit != main_loss


def test_a_replayed_run_loads_the_same_commit(hub_cache, continued, tmp_path):
    first, _ = continued("v1")
    second = tmp_path / "replayed"
    assert main(["pretrain", "--config", str(first / "config.yaml"), "--output", str(second), "--no-demo"]) == 0
    config = yaml.safe_load((second / "config.yaml").read_text(encoding="utf-8"))
    assert config["revision"] == hub_cache.commits[hub_cache.families["bert"]]["v1"]
    assert losses(second) == losses(first)


def test_a_pickle_only_repository_loads_safely_and_says_so(hub_cache, files, capsys):
    assert main(files.argv("pretrain", hub_cache.pickle_only)) == 0
    printed = said(capsys.readouterr().out)
    note = "tokenmask-test/tiny-bert-pickle-only: no safetensors weights; pytorch_model.bin is loaded"
    assert printed.count(note) == 1 and printed.count("weights_only=True") == 1, printed
    assert main(files.argv("evaluate", hub_cache.pickle_only)) == 0


def test_minilm_by_hub_id_continues_with_a_new_head(hub_cache, files, capsys):
    assert main(files.argv("pretrain", hub_cache.minilm)) == 0
    printed = said(capsys.readouterr().out)
    assert f"{hub_cache.minilm}: no masked-LM head in the checkpoint" in printed and "a new one is initialised" in printed
    model = AutoModelForMaskedLM.from_pretrained(files.output / "model", local_files_only=True)
    assert type(model).__name__ == "BertForMaskedLM" and model.config.hidden_size == 384


def test_minilm_by_hub_id_is_fine_tuned(hub_cache, files):
    assert main(files.argv("finetune", hub_cache.minilm)) == 0
    results = json.loads((files.output / "results.json").read_text(encoding="utf-8"))
    assert sorted(results["labels"]) == ["neg", "pos"]


def test_minilm_by_hub_id_embeds_and_searches(hub_cache, files, capsys):
    assert main(files.argv("embed", hub_cache.minilm)) == 0
    vectors = np.load(files.vectors)
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    argv = ["search", hub_cache.minilm, "--index", str(files.vectors), "--texts", str(files.texts), "--json"]
    capsys.readouterr()
    assert main([*argv, "--query", "the play is the thing"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["rank"] for r in results] == [1, 2, 3] and results[0]["text"] == "the play is the thing"
    scores = [r["score"] for r in results]
    assert scores[0] == pytest.approx(1, abs=1e-4) and scores[0] > scores[1] >= scores[2]  # the query is row 1's text


def test_a_tokenizer_by_hub_id_is_pinned_for_a_new_model(hub_cache, files):
    repo = hub_cache.families["bert"]
    argv = ["pretrain", str(files.corpus), "--preset", "bert-tiny", "--tokenizer", repo, "--output", str(files.output)]
    assert main([*argv, *PRETRAIN_TINY]) == 0
    config = yaml.safe_load((files.output / "config.yaml").read_text(encoding="utf-8"))
    assert (config["tokenizer"], config["init"], config["revision"]) == (repo, None, hub_cache.commits[repo]["main"])
    saved, own = AutoTokenizer.from_pretrained(files.output / "model"), AutoTokenizer.from_pretrained(hub_cache.snapshot(repo))
    assert saved.get_vocab() == own.get_vocab()


# ---------------------------------------------------------------------------------------- the Hub's refusals, online

REFUSALS: dict[str, tuple[str, str | None, int, str, tuple[str, ...]]] = {
    # case: (repository, --revision, the Hub's status and X-Error-Code, words the message must hold)
    # huggingface.co answers 401 to one without a token whether the repository is private or missing, 404 with a token
    "not found": ("tokenmask-test/no-such-model", None, 404, "RepoNotFound", ("check the name", "HF_TOKEN")),
    "private, no token": ("tokenmask-test/private-model", None, 401, "RepoNotFound", ("check the name", "private", "HF_TOKEN")),
    # gated: 401 without a token, 403 with one whose owner has not accepted the conditions
    "gated, no token": ("tokenmask-test/gated-model", None, 401, "GatedRepo", ("is gated", "accept its conditions", "HF_TOKEN")),
    "gated, not accepted": ("tokenmask-test/gated-model", None, 403, "GatedRepo", ("is gated", "accept its conditions", "HF_TOKEN")),
    "no such revision": ("tokenmask-test/tiny-bert", "v2", 404, "RevisionNotFound", ("no revision 'v2' on the Hub", "--revision")),
}  # fmt: skip
"""The refusals only an online Hub gives, as ``hf_raise_for_status`` (huggingface_hub/utils/_http.py) reads them."""


class FakeHub:
    """Answers ``GET /api/models/REPO/revision/REV`` (``snapshot_download``'s first call) with
    the status and ``X-Error-Code`` :attr:`answer` holds, as huggingface.co does; 404 to the rest."""

    def __init__(self) -> None:
        self.answer: tuple[int, str] = (404, "RepoNotFound")
        self.asked: list[str] = []
        self.tokens: list[str | None] = []  # the Authorization header of each request
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub.asked.append(self.path.split("?")[0])
                hub.tokens.append(self.headers.get("Authorization"))
                status, code = hub.answer if self.path.startswith("/api/models/") else (404, "")
                body = json.dumps({"error": f"{code or 'Not found'} (fake Hub)"}).encode()
                self.send_response(status)
                if code:
                    self.send_header("X-Error-Code", code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture(scope="module")
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    thread = threading.Thread(target=hub.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)  # quick to shut down
    thread.start()
    yield hub
    hub.server.shutdown()
    hub.server.server_close()
    thread.join(timeout=5)


def go_online(monkeypatch, endpoint: str) -> None:
    """huggingface_hub online, at ``endpoint``: both are read at call time (``HfApi`` takes
    ``constants.ENDPOINT`` when built, per ``snapshot_download``; the session's request hook
    and ``tokenmask.hub`` read ``constants.HF_HUB_OFFLINE``). No proxy: 127.0.0.1 is asked directly."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.mark.parametrize("case", REFUSALS)
def test_the_hub_s_refusal_is_one_line_that_says_what_to_do(case, fake_hub, hub_cache, monkeypatch):
    repo, revision, status, code, words = REFUSALS[case]
    go_online(monkeypatch, fake_hub.endpoint)
    fake_hub.answer, fake_hub.asked = (status, code), []
    with pytest.raises(HubError) as refusal:
        download(repo, revision=revision)
    message = str(refusal.value)
    assert f"/api/models/{repo}/revision/{revision or 'main'}" in fake_hub.asked  # the Hub was asked, not the cache
    assert "\n" not in message and message.startswith(repo) and all(word in message for word in words), message
    if code == "GatedRepo":
        assert re.search(rf"https?://\S+/{re.escape(repo)}\b", message), message  # the page whose conditions to accept


def test_evaluate_a_revision_the_hub_does_not_have(fake_hub, hub_cache, corpus, monkeypatch, capsys):
    """Offline, v2 is only 'not in the cache'; online, the Hub says it does not exist."""
    go_online(monkeypatch, fake_hub.endpoint)
    fake_hub.answer = (404, "RevisionNotFound")
    repo = hub_cache.families["bert"]
    assert main(["evaluate", repo, str(corpus), "--revision", "v2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tokenmask evaluate: error: {repo} has no revision 'v2' on the Hub") and "--revision" in line, line


@pytest.fixture
def closed_port() -> str:
    """An endpoint nothing listens at: a port the system just gave out and took back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_no_hub_and_no_cache_says_the_hub_cannot_be_reached(closed_port, hub_cache, monkeypatch):
    go_online(monkeypatch, closed_port)
    with pytest.raises(
        HubError,
        match=r"neither a local folder nor in the Hugging Face cache .*, and the Hub cannot be reached: check the connection",
    ):
        download(hub_cache.missing)


def test_no_hub_falls_back_to_the_cache(closed_port, hub_cache, monkeypatch):
    go_online(monkeypatch, closed_port)
    repo = hub_cache.families["bert"]
    snapshot = download(repo, revision="v1")
    assert snapshot.commit == hub_cache.commits[repo]["v1"] and snapshot.folder == hub_cache.snapshot(repo, "v1")


def test_hf_token_goes_to_the_hub(fake_hub, hub_cache, monkeypatch):
    """``HF_TOKEN`` is the user's way to reach private and gated repositories: huggingface_hub
    reads it at call time and sends it with tokenmask's requests."""
    go_online(monkeypatch, fake_hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", "hf_tokenmask_test")
    fake_hub.answer, fake_hub.asked, fake_hub.tokens = (404, "RepoNotFound"), [], []
    with pytest.raises(HubError, match="give a token with access"):
        download("tokenmask-test/private-model")
    assert fake_hub.tokens and set(fake_hub.tokens) == {"Bearer hf_tokenmask_test"}
