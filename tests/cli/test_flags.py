"""Flags come from the config declarations: no abbreviations, flags over the --config file in any order, true help."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tokenmask.cli.flags import config_from
from tokenmask.cli.main import main
from tokenmask.cli.parser import COMMANDS, SHORT_HELP, build_parser
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import leaves


def parsed(argv):
    return build_parser().parse_args(argv)


def listed(argv, capsys) -> tuple[list[str], str]:
    """The flags a help lists (one per line that opens with one: ``--help-all`` too), and its text."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    text = capsys.readouterr().out
    return re.findall(r"^  (--[\w-]+)", text, re.M), text


def declared(*config_types: type) -> dict[str, bool]:
    """``{flag: advanced}`` for every setting of the configs that is a flag (not a positional argument)."""
    return {
        f"--{leaf.key.replace('_', '-')}": leaf.advanced
        for config_type in config_types
        for leaf in leaves(config_type)
        if not leaf.declared.metadata.get("positional")
    }


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
    flags, _ = listed([command, "--help-all"], capsys)
    assert set(declared(config_type)) <= set(flags)


@pytest.mark.parametrize("command, config_type, most", [("pretrain", PretrainConfig, 40), ("finetune", FinetuneConfig, 35)])
def test_help_lists_the_common_settings_and_help_all_every_one(command, config_type, most, capsys):
    flags = declared(config_type)
    hidden = {flag for flag, advanced in flags.items() if advanced}
    shown, text = listed([command, "--help"], capsys)
    assert len(shown) <= most and hidden and not hidden & set(shown)
    assert set(flags) - hidden <= set(shown)
    assert text.rstrip().endswith(f"{len(hidden)} more settings: --help-all lists them")
    shown, text = listed([command, "--help-all"], capsys)
    assert set(flags) <= set(shown) and "more settings" not in text


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_help_all_lists_every_flag_of_every_command_and_a_short_help_leaves_none_out(command, capsys):
    flags = declared(command.config, *command.options)
    every, _ = listed([*command.name.split(), "--help-all"], capsys)
    assert set(flags) <= set(every)
    shown, _ = listed([*command.name.split(), "--help"], capsys)
    if sum(1 for config in (command.config, *command.options) for _ in leaves(config)) <= SHORT_HELP:
        assert shown == every
    else:
        assert set(shown) == set(every) - {flag for flag, advanced in flags.items() if advanced}


def test_a_setting_left_out_of_help_is_a_flag_and_a_yaml_key_as_any_other(tmp_path, capsys):
    shown, _ = listed(["pretrain", "--help"], capsys)
    assert not {"--layer-decay", "--keep-last", "--compile", "--num-proc"} & set(shown)
    settings = tmp_path / "run.yaml"
    settings.write_text("layer-decay: 0.8\nkeep_last: 3\n", encoding="utf-8")
    args = parsed(["pretrain", "--compile", "--num-proc", "2", "--config", str(settings)])
    config = config_from(PretrainConfig, args, config_file=args.config)
    assert (config.loop.layer_decay, config.loop.keep_last, config.loop.compile, config.blocks.num_proc) == (0.8, 3, True, 2)


def test_help_all_imports_neither_torch_nor_transformers():
    code = (
        "import contextlib, io, sys\nfrom tokenmask.cli.main import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['pretrain', '--help-all'])\n"
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


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
