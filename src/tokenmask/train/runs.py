"""A run's output folder: one run per folder, where a resumed run starts, what a checkpoint holds, which are kept.

:mod:`tokenmask.train.checkpoint` writes and verifies one checkpoint folder; this module
manages a run's ``OUTPUT/checkpoints/step-N`` folders for the loop (:mod:`tokenmask.train.loop`):
refusing to mix two runs, picking the newest *valid* checkpoint to resume from (skipping
damaged ones, cleaning up after a kill, trimming the metrics log), saving the run's state
(:func:`save_run_state`) and putting it back (:func:`restore_run_state`), and pruning old
checkpoints only once a new one is on disk and verified. The model saved at shares of the run
(``OUTPUT/snapshots``) is :class:`Snapshots`'s.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.files import write_text
from tokenmask.hub import NEVER_REPLAYED
from tokenmask.settings import flatten
from tokenmask.train.checkpoint import (
    SNAPSHOTS,
    InvalidCheckpoint,
    checkpoint_folders,
    load_state,
    newest_valid_checkpoint,
    remove_leftovers,
    save_checkpoint,
    save_model,
    snapshot_folder,
    verify_checkpoint,
)
from tokenmask.train.logs import METRICS_FILE, NoLog, RunLog, truncate_metrics
from tokenmask.train.parallel import restore_rng_state
from tokenmask.train.trackers import start_trackers

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator

    from tokenmask.collate.stream import Shard
    from tokenmask.train.config import LoopConfig
    from tokenmask.train.job import DataPosition, Job, Reporter, TrainResult
    from tokenmask.train.schedule import Schedule

CHECKPOINTS = "checkpoints"
CONFIG_FILE = "config.yaml"
"""Every resolved setting of the run; its presence marks a folder that holds a run."""


def check_output(output: Path, config: LoopConfig) -> None:
    """Refuse to mix two runs in one folder (nothing is changed: see :func:`clear_old_run`).

    ``resume`` on a folder without a run is allowed (:func:`resume_checkpoint` then starts from
    the beginning), so a preemption script can always pass ``--resume``.

    Raises:
        ValueError: no output folder given, or ``output`` holds a run and neither ``resume`` nor
            ``overwrite`` is set.
    """
    if not config.output:  # LoopConfig's default: Path("") would be the current folder
        raise ValueError("--output is required: the folder the run writes to (LoopConfig.output)")
    holds_run = (output / CONFIG_FILE).exists()
    if holds_run and not (config.resume or config.overwrite):
        raise ValueError(f"{output} already holds a run: pass --resume to continue it, or --overwrite")


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Write a run's flat settings as YAML (``tokenmask pretrain --config PATH`` replays them), atomically.

    Permission to run a repository's code is never written (:data:`~tokenmask.hub.NEVER_REPLAYED`):
    a replayed config, perhaps someone else's, runs no code unless ``--trust-remote-code`` is typed.
    """
    import yaml

    kept = {key: value for key, value in settings.items() if key not in NEVER_REPLAYED}
    write_text(path, yaml.safe_dump(kept, sort_keys=False, allow_unicode=True))


def clear_old_run(output: Path) -> None:
    """``--overwrite``: remove the previous run's checkpoints, snapshots, model (and a replaced-token
    detection run's generator). The loop calls it once the new run's data and model are built, so a
    run refused for bad input destroys nothing."""
    for stale in (CHECKPOINTS, SNAPSHOTS, "model", "generator"):
        shutil.rmtree(output / stale, ignore_errors=True)


def resume_checkpoint(output: Path, report: Callable[[str], None] = lambda text: None) -> Path | None:
    """Where a resumed run continues: the newest valid checkpoint in ``output``, or None to start afresh.

    Cleans up the temporary folders of a run killed while saving (a repair that loses nothing:
    a half-written folder is removed, a whole one put back) and skips (and reports) damaged
    checkpoints. Without any checkpoint (a run killed before its first one, or no run at all)
    it reports that the run starts from the beginning and returns None. The run's log is left
    as it is until the resumed run's input is built: :func:`trim_metrics`.

    Raises:
        ValueError: there are checkpoints but none is valid; the message gives each one's
            reason. Starting afresh would silently throw the run away, so ``--overwrite`` must
            say so.
    """
    folder = output / CHECKPOINTS
    for where in (folder, output, output / SNAPSHOTS):
        for name in remove_leftovers(where) if where.is_dir() else []:
            report(f"removed {where.name}/{name}: unfinished, left by a killed run")
    reasons: list[str] = []

    def skip(text: str) -> None:
        reasons.append(text)
        report(text)

    checkpoint = newest_valid_checkpoint(folder, report=skip)
    if checkpoint is None and reasons:
        raise ValueError(f"--resume: no valid checkpoint in {folder} ({'; '.join(reasons)}); pass --overwrite to start afresh")
    if checkpoint is None:
        report(f"--resume: {output} holds no checkpoint yet: starting from the beginning")
        return None
    return checkpoint


def trim_metrics(output: Path, step: int, report: Callable[[str], None] = lambda text: None) -> None:
    """Drop the records after ``step`` (the resumed checkpoint's) from ``metrics.jsonl``: the
    resumed run trains and logs those steps again. The loop calls it once the run's input is
    built, so a resume refused for bad input leaves the log whole."""
    dropped = truncate_metrics(output, step)
    if dropped:
        report(f"dropped {dropped} record{'s' * (dropped != 1)} after step {step} from {METRICS_FILE} (they are trained again)")


def save_run_state(
    output: Path,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    schedule: Schedule,
    result: TrainResult,
    rng: list[dict[str, Any]],
    *,
    data: list[dict[str, Any]] | None = None,
    scaler: torch.amp.GradScaler | None = None,
    keep: int = 2,
    report: Callable[[str], None] = lambda text: None,
) -> None:
    """A resumable checkpoint of the run at ``result.steps`` (:func:`save_resumable`): step,
    tokens, time, optimizer, schedule, every process's random state (``rng``) and data
    position (``data``), and the fp16 gradient scaler's state when there is one."""
    state = {
        "step": result.steps,
        "tokens": result.tokens,
        "optimizer": optimizer.state_dict(),
        **schedule.state(),
        "seconds": result.seconds,
        "rng": rng,
        **({"data": data} if data is not None else {}),
        **({"scaler": scaler.state_dict()} if scaler is not None else {}),
    }
    save_resumable(output, model, tokenizer, state, keep_last=keep, report=report)


def restore_run_state(
    checkpoint: Path, optimizer: torch.optim.Optimizer, schedule: Schedule, result: TrainResult, shard: Shard,
    reporter: Reporter, *, scaler: torch.amp.GradScaler | None = None, position: DataPosition | None = None,
) -> None:  # fmt: skip
    """Continue where ``checkpoint`` stopped: optimizer, schedule, step, tokens, this process's
    random state and data ``position``, and the fp16 gradient scaler when both the run and the
    checkpoint have one.

    Raises:
        ValueError: the run needs a data position that the checkpoint lacks (or has one for
            another number of processes), or the checkpoint has one that the run would ignore.
    """
    state = load_state(checkpoint)
    _check_data_position(checkpoint, state.get("data"), position is not None, shard.world)
    if position is not None:
        position.load(state["data"][shard.rank])
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and "scaler" in state:
        scaler.load_state_dict(state["scaler"])
    if not restore_rng_state(state["rng"], shard.rank):
        reporter.message("the checkpoint was written by fewer processes: new processes' dropout is seeded afresh")
    horizon = schedule.horizon
    schedule.load(state)
    if horizon is not None and schedule.horizon == horizon != state["horizon"]:  # a step limit only, changed
        reporter.message(
            f"the step limit changed from {state['horizon']:,} to {horizon:,}: the learning-rate decay now ends there"
        )
    result.steps, result.tokens = int(state["step"]), int(state["tokens"])
    result.seconds = float(state.get("seconds", 0.0))
    reporter.message(f"resuming from {checkpoint} (step {result.steps}, {result.seconds / 60:.1f} min trained)")


def start_decay(checkpoint: Path, optimizer: torch.optim.Optimizer, lr: float, reporter: Reporter) -> None:
    """Begin a decay run (``decay_from``) with the optimizer state of a stable run's ``checkpoint``:
    Adam's moments, and the peak learning rate ``lr`` (said when the stable run's differs).

    Raises:
        ValueError: the checkpoint's optimizer is not this model's (other parameter groups).
    """
    saved = load_state(checkpoint)["optimizer"]
    if len(saved["param_groups"]) != len(optimizer.param_groups):
        raise ValueError(f"{checkpoint}'s optimizer has other parameter groups: decay it with the stable run's settings")
    optimizer.load_state_dict(saved)
    peak = saved["param_groups"][0].get("initial_lr", lr)
    for group in optimizer.param_groups:
        group["lr"] = group["initial_lr"] = lr  # LambdaLR's base: the schedule's multipliers apply to it
    if peak != lr:
        reporter.message(f"decaying from --lr {lr:g}; the stable run's peak was {peak:g}")
    reporter.message(f"decay from {checkpoint}: its model and optimizer state")


def _check_data_position(checkpoint: Path, saved: list[dict[str, Any]] | None, needed: bool, world: int) -> None:
    if needed and saved is None:
        raise ValueError(f"{checkpoint} holds no stream position (written by a run without --streaming): resume without it")
    if not needed and saved is not None:
        raise ValueError(f"{checkpoint} was written by a --streaming run, whose data order only it can resume: add --streaming")
    if saved is not None and len(saved) != world:
        raise ValueError(f"{checkpoint} was written by {len(saved)} processes; a --streaming run resumes on as many, not {world}")


def save_resumable(
    output: Path,
    model: Any,
    tokenizer: Any,
    state: dict[str, Any],
    *,
    keep_last: int = 2,
    report: Callable[[str], None] = lambda text: None,
) -> Path:
    """Write ``OUTPUT/checkpoints/step-N`` (N = ``state["step"]``), verify it, then keep the ``keep_last`` newest valid ones.

    Pruning runs only once the new checkpoint verifies, so it never removes the only good
    checkpoint; damaged ones never count among those kept (and are removed). A new checkpoint
    that fails verification is reported and nothing is removed. Other folders of ``OUTPUT``
    (``model``, fine-tuning's ``best``) are never touched.
    """
    folder = save_checkpoint(output / CHECKPOINTS / f"step-{state['step']}", model, tokenizer, state)
    try:
        verify_checkpoint(folder)
    except InvalidCheckpoint as error:
        report(f"warning: the new checkpoint {CHECKPOINTS}/{folder.name} does not verify ({error}); no checkpoint removed")
        return folder
    kept = [folder]
    for path in checkpoint_folders(folder.parent):
        if path == folder:
            continue
        if len(kept) < keep_last and _is_valid(path):
            kept.append(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
    return folder


def _is_valid(folder: Path) -> bool:
    """Whether an older checkpoint still counts among those kept: complete and of the right sizes
    (hashing every kept checkpoint at every save would read gigabytes for a large model)."""
    try:
        verify_checkpoint(folder, hashes=False)
    except InvalidCheckpoint:
        return False
    return True


class Snapshots:
    """The model saved at shares of the run's limit (``config.snapshots``), each once: a share
    whose folder exists (a resumed run's) is not taken again. Only the ``main`` process takes them."""

    def __init__(self, config: LoopConfig, output: Path, reporter: Reporter, *, main: bool) -> None:
        self.config, self.output, self.reporter = config, output, reporter
        shares = sorted(config.snapshots) if main else []
        self.waiting = [share for share in shares if not snapshot_folder(output, share).is_dir()]

    def take(self, model: Any, job: Job, result: TrainResult) -> None:  # a PreTrainedModel
        while self.waiting and self.config.snapshot_due(self.waiting[0], result.steps, result.tokens):
            share = self.waiting.pop(0)
            notes = {"share": share, "step": result.steps, "tokens": result.tokens}
            save_model(snapshot_folder(self.output, share), model, job.tokenizer, card=job.card(result), notes=notes)
            self.reporter.message(
                f"step {result.steps}: snapshot at {share:g} of the run in {snapshot_folder(self.output, share)}"
            )


def non_finite_message(config: LoopConfig, output: Path, step: int) -> str:
    """Why the run stopped after ``max_bad_steps`` skipped steps in a row, and where its last good checkpoint is."""
    kept = newest_valid_checkpoint(output / CHECKPOINTS)
    where = f"the last good checkpoint is {kept}" if kept is not None else "no checkpoint was written"
    return (
        f"stopped at step {step:,}: {config.max_bad_steps} steps in a row had a NaN or infinite loss or gradient "
        f"(each was skipped); {where}. Lower --lr, raise --warmup, or use --precision fp32"
    )


def open_run_log(
    config: LoopConfig,
    accelerator: Accelerator,
    shard: Shard,
    reporter: Reporter,
    trackers: list[str],
    settings: Mapping[str, Any] | None,
    *,
    resumed: bool,
    steps: int,
) -> RunLog | NoLog:
    """Start the trackers, then (main process) drop a ``resumed`` run's records after its ``steps``, write
    ``settings`` (by default the config's) to OUTPUT/config.yaml and open the run log."""
    settings = settings if settings is not None else flatten(config)
    if trackers:  # a tracker that fails to start (a bad URI, no login) stops the run before OUTPUT is written too
        start_trackers(accelerator, trackers, settings)
    if not shard.is_main:
        return NoLog()
    output = Path(config.output)
    if resumed:
        trim_metrics(output, steps, reporter.message)
    output.mkdir(parents=True, exist_ok=True)
    write_settings(output / CONFIG_FILE, settings)
    return RunLog(output, append=resumed, mirror=accelerator.log if trackers else None)
