"""Bad input gets one clear line on stderr and a documented exit code."""

import os

from triage.errors import EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_USAGE


def _no_traceback(result):
    err = result.stderr.decode()
    assert "Traceback" not in err
    return err


def test_missing_file(cli, tmp_path):
    result = cli("classify", tmp_path / "nope.log")
    assert result.returncode == EXIT_BAD_INPUT
    assert "no such file" in _no_traceback(result)


def test_directory(cli, tmp_path):
    result = cli("classify", tmp_path)
    assert result.returncode == EXIT_BAD_INPUT
    assert "is a directory" in _no_traceback(result)


def test_empty(cli, tmp_path):
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    result = cli("classify", path)
    assert result.returncode == EXIT_BAD_INPUT
    assert "empty" in _no_traceback(result)


def test_binary_garbage(cli, tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(os.urandom(200_000))
    result = cli("classify", path)
    assert result.returncode == EXIT_BAD_INPUT
    assert "does not look like a text log" in _no_traceback(result)


def test_zip_shard_gets_a_hint(cli, tmp_path):
    path = tmp_path / "shard.pt"
    path.write_bytes(b"PK\x03\x04" + bytes(range(32)) * 3000)
    result = cli("classify", path)
    assert result.returncode == EXIT_BAD_INPUT
    assert "zip archive" in _no_traceback(result)


def test_invalid_utf8_is_read(cli):
    log = b"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nValueError: bad \xff\xfe byte\n"
    result = cli("classify", "-", stdin=log)
    assert result.returncode == EXIT_UNKNOWN
    _no_traceback(result)
    assert "ValueError" in result.stdout.decode()


def test_huge_paste_is_read_head_and_tail(cli):
    chatter = b"[2026-12-02 18:00:00,000] [INFO] [logging.py:107:log_dist] [Rank 0] step=1, skipped=0, lr=[0.001]\n"
    log = chatter * 400_000  # ~40 MB, past the 32 MiB limit
    result = cli("classify", "-", stdin=log)
    assert result.returncode == EXIT_UNKNOWN
    assert "head and tail" in result.stdout.decode()
    _no_traceback(result)


def test_no_input_on_a_terminal_is_a_usage_error(cli):
    # No stdin pipe given: subprocess passes our stdin, which pytest replaces;
    # emulate a terminal-less invocation with no argument and empty stdin.
    result = cli("classify", stdin=b"")
    assert result.returncode == EXIT_BAD_INPUT
    assert "empty" in _no_traceback(result)


def test_unknown_subcommand(cli):
    result = cli("frobnicate")
    assert result.returncode == EXIT_USAGE


def test_bad_rules_dir(cli, tmp_path):
    result = cli("classify", "--rules", tmp_path / "none", "-", stdin=b"hello\n")
    assert result.returncode == 4
    assert "no rules directory" in _no_traceback(result)
