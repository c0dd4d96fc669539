"""The top-level ``fpsim`` command line: subcommands, typos, formats, missing extras."""

import subprocess
import sys

import pytest

from fpsim.cli import main


def refused(capsys, *argv):
    """``main(argv)``'s exit status, stdout and stderr, where argparse exits."""
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize("word, suggestion", [("reprodcue", "reproduce"),
                                              ("comapre", "compare"), ("bnech", "bench"),
                                              ("Compare", "compare")])
def test_a_mistyped_subcommand_is_suggested(capsys, word, suggestion):
    code, out, err = refused(capsys, word, "--quick")
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (
        f"fpsim: error: {word!r} is neither a subcommand (bench, compare, reproduce) nor a "
        f"number; did you mean {suggestion!r}?")
    assert "fpsim {bench,compare,reproduce}" in err  # the usage lists them


@pytest.mark.parametrize("word", ["xyz", "fp16", "0x1p-3", ""])
def test_a_word_like_no_subcommand_gets_no_suggestion(capsys, word):
    code, out, err = refused(capsys, word)
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (f"fpsim: error: {word!r} is neither a subcommand "
                                    "(bench, compare, reproduce) nor a number")


def test_the_help_lists_the_subcommands(capsys):
    code, out, _ = refused(capsys, "-h")
    assert code == 0
    assert out.startswith("usage: fpsim [-h]")
    assert "\n       fpsim {bench,compare,reproduce} [-h] ...\n" in out
    for name in ("bench", "compare", "reproduce"):
        assert any(line.split()[:1] == [name] for line in out.splitlines()), name


KNOWN = ("known formats: bf16, e8m0, fp16, fp32, fp4_e2m1, fp64, fp6_e2m3, fp6_e3m2, "
         "fp8_e4m3, fp8_e4m3fnuz, fp8_e5m2, fp8_e5m2fnuz, tf32, ue4m3, or e<E>m<M>")


@pytest.mark.parametrize("argv, message", [
    (["--formats", "fp17", "0.1"], f"unknown format 'fp17'; {KNOWN}"),
    (["--formats", "fp17"], f"unknown format 'fp17'; {KNOWN}"),
    (["0.1", "--formats", "fp16,"], f"unknown format ''; {KNOWN}"),
    (["--formats", "fp16,e99m2", "1"], "exp_bits=99 is out of the supported range"),
])
def test_an_unknown_format_prints_only_the_error(capsys, argv, message):
    code, out, err = refused(capsys, *argv)
    assert code == 2 and out == ""  # no table before the error
    last = err.splitlines()[-1]
    assert last.startswith("fpsim: error: --formats: ") and message in last, last


def test_known_formats_still_print_the_table_and_the_roundings(capsys):
    assert main(["--formats", "fp8_e4m3,e6m9", "0.1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fpsim ") and "\n  fp8_e4m3        0.1015625" in out
    assert "\n  e6m9      " in out


@pytest.mark.parametrize("name, module", [("bench", "fpsim.bench"),
                                          ("compare", "fpsim.compare.command"),
                                          ("reproduce", "fpsim.reproduce.command")])
def test_a_missing_extra_is_one_line_from_every_subcommand(monkeypatch, capsys, name, module):
    import importlib

    from fpsim._optional import MissingDependency

    message = "the thing needs distributed, which is not installed: pip install 'fpsim[cluster]'"

    def missing(argv):
        raise MissingDependency(message)

    monkeypatch.setattr(importlib.import_module(module), "main", missing)
    assert main([name, "--whatever"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"fpsim {name}: error: {message}\n"


def test_a_missing_extra_is_one_line_end_to_end(tmp_path):
    """A real missing import under ``python -m fpsim``: no traceback, exit status 2."""
    out = tmp_path / "out"
    code = ("import sys, runpy\n"
            "sys.modules['cupy'] = None\n"
            "import fpsim._optional\n"
            "fpsim._optional.cuda_driver_missing = lambda: None\n"
            f"sys.argv = ['fpsim', 'compare', '--suite', 'gpu', '--out', {str(out)!r}]\n"
            "runpy.run_module('fpsim', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == ("fpsim compare: error: the GPU suite (fpsim compare --suite gpu) "
                             "needs cupy, which is not installed: pip install 'fpsim[gpu]'\n")
    assert not out.exists()
