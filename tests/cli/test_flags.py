"""Flags come from the config declarations: no abbreviations, flags over the --config file in any order, true help."""

from __future__ import annotations

import pytest

from tokenmask.cli.flags import config_from
from tokenmask.cli.main import main
from tokenmask.cli.parser import build_parser
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import leaves


def parsed(argv):
    return build_parser().parse_args(argv)


def test_abbreviated_flags_are_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        parsed(["pretrain", "--output", "x", "--max-step", "5"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --max-step" in capsys.readouterr().err


@pytest.mark.parametrize("order", ["flag first", "file first"])
def test_flags_override_the_config_file_whatever_their_order(tmp_path, order):
    settings = tmp_path / "run.yaml"
    settings.write_text("max-steps: 7\nlr: 0.01\nselection: exact\noutput: from-file\n", encoding="utf-8")
    flags = ["--max-steps", "3"]
    argv = (
        ["pretrain", *flags, "--config", str(settings)]
        if order == "flag first"
        else ["pretrain", "--config", str(settings), *flags]
    )
    args = parsed(argv)
    config = config_from(PretrainConfig, args, config_file=args.config)
    assert config.loop.max_steps == 3  # the flag
    assert config.loop.lr == 0.01 and config.masking.selection.mode == "exact" and config.loop.output == "from-file"  # the file


@pytest.mark.parametrize("command, config_type", [("pretrain", PretrainConfig), ("finetune", FinetuneConfig)])
def test_every_setting_has_a_flag_and_the_parsed_defaults_are_the_configs(command, config_type, capsys):
    assert config_from(config_type, parsed([command])) == config_type()
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = capsys.readouterr().out
    for leaf in leaves(config_type):
        if not leaf.declared.metadata.get("positional"):
            assert f"--{leaf.key.replace('_', '-')}" in help_text, leaf.key


def test_help_states_the_real_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: modernbert-tiny)" in shown and "bert-tiny)" not in shown.split("--preset")[0]
    assert "(default: 0.002)" in shown and "(9 when no limit is given)" in shown
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "modernbert-tiny" in capsys.readouterr().out


def test_a_bad_key_in_the_config_file_names_the_file(tmp_path, capsys):
    settings = tmp_path / "run.yaml"
    settings.write_text("max-stepz: 7\n", encoding="utf-8")
    assert main(["pretrain", "--config", str(settings), "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"tokenmask pretrain: error: {settings}: unknown setting 'max-stepz'"
    assert not (tmp_path / "out").exists()


def test_the_settings_reference_lists_every_flag_of_every_command():
    from tokenmask.cli.parser import COMMANDS
    from tokenmask.cli.reference import settings_reference

    page = settings_reference()
    for command in COMMANDS:
        assert f"## tokenmask {command.name}\n" in page
        for config in (command.config, *command.options):
            for leaf in leaves(config):
                if not leaf.declared.metadata.get("positional"):
                    assert f"`--{leaf.key.replace('_', '-')}`" in page, (command.name, leaf.key)
    assert "| `--max-length` | whole number | `128` | >= 8 |" in page and "| `--lr` | number | `0.0001` | > 0 |" in page
    assert "hf:NAME\\[:CONFIG\\]" in page  # brackets escaped: no Markdown link
