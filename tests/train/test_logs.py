"""The run log: trimming it back to a checkpoint's step when a killed run resumes."""

import json

from tokenmask.train.logs import METRICS_FILE, RunLog, read_metrics, truncate_metrics


def test_truncating_keeps_the_records_up_to_the_step_and_drops_a_half_line(tmp_path):
    log = RunLog(tmp_path)
    for step in range(1, 6):
        log.write({"step": step, "loss": 1.0 / step})
        if step % 2 == 0:
            log.write({"step": step, "eval_loss": 2.0 / step})
    log.close()
    with (tmp_path / METRICS_FILE).open("a") as handle:
        handle.write('{"step": 6, "lo')  # killed mid-write
    assert truncate_metrics(tmp_path, 4) == 2  # step 5 and the half line
    assert [(r["step"], "eval_loss" in r) for r in read_metrics(tmp_path)] == [
        (1, False),
        (2, False),
        (2, True),
        (3, False),
        (4, False),
        (4, True),
    ]
    assert truncate_metrics(tmp_path, 4) == 0
    resumed = RunLog(tmp_path, append=True)
    resumed.write({"step": 5, "loss": 0.2})
    resumed.close()
    assert [json.loads(line)["step"] for line in (tmp_path / METRICS_FILE).read_text().splitlines()] == [1, 2, 2, 3, 4, 4, 5]


def test_truncating_a_missing_log_does_nothing(tmp_path):
    assert truncate_metrics(tmp_path, 3) == 0 and not (tmp_path / METRICS_FILE).exists()
