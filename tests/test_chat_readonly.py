"""The chat's read-only promise, program by program (issue 20.4).

`sort -o FILE` and `uniq IN OUT` used to pass `readonly.check` and write files. Each reader
with a writing option is checked against its own allow-list (`readonly.READER_OPTIONS`); every
other reader must have no such option, which the last test reads from the program's --help.
"""

import re
import shutil
import subprocess

import pytest

from triage.chat import readonly


@pytest.mark.parametrize("command", [
    "sort -o {out} {src}", "sort -uo{out} {src}", "sort --output={out} {src}", "sort --output {out} {src}",
    "sort -T {dir} {src}", "sort --compress-program=touch {src}", "sort -n {src} | sort -o {out}",
    "uniq {src} {out}", "uniq -c {src} {out}", "uniq -f 1 {src} {out}",
    "file -C -m {src}", "file --compile -m {src}",
    "hostname ds-triage-test", "hostname -F {src}", "hostname -b ds-triage-test",
])
def test_writing_options_of_readers_are_refused(command, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("b\na\na\n")
    line = command.format(src=src, out=tmp_path / "out.txt", dir=tmp_path)
    why = readonly.check(line)
    assert why and "read-only" in why, (line, why)


@pytest.mark.parametrize("command", [
    "sort -k2,2nr -t, {src}", "sort -t o {src}", "sort -S 10M --parallel=2 -u {src}", "sort -- {src}",
    "uniq -c {src}", "uniq -f 1 -s 2 {src}", "sort {src} | uniq -c", "file -b {src}", "file -m /dev/null -b {src}",
    "hostname", "hostname -s",
])
def test_reading_options_still_run(command, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("b,2\na,1\na,1\n")
    line = command.format(src=src)
    assert readonly.check(line) is None, line
    before = sorted(p.name for p in tmp_path.iterdir())
    run = readonly.run(line)
    assert run.returncode == 0, run.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside the input


# What a --help says of an option that writes a file, runs a program or sets system state.
# (Words like "delete" are left out: for tr and basename they mean characters, not files.)
WRITES = re.compile(r"write (?:\w+ )?to FILE|with PROG|for temporaries|compile|set (?:default )?host ?name|"
                    r"set NIS", re.I)
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@pytest.mark.parametrize("program", sorted(readonly.READERS))
def test_every_reader_option_that_writes_is_refused(program, tmp_path):
    """Each --help line that describes writing, running or setting names options the chat refuses."""
    if shutil.which(program) is None:
        pytest.fail(f"{program} is on the chat's READERS but not installed here")
    done = subprocess.run([program, "--help"], capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    text = done.stdout + done.stderr
    assert len(text) > 40, f"{program} --help printed nothing to check"
    for line in text.splitlines():
        if not WRITES.search(line) or not line.strip().startswith(("-", "Usage:")):
            continue  # continuation lines name options only in passing
        named = re.split(r"(?<=\S)\s{2,}", line.strip(), maxsplit=1)[0]  # the options, not the prose
        for option in OPTION.findall(named):
            if option in ("--help", "--version"):
                continue
            why = readonly.check(f"{program} {option}{'=x' if option.startswith('--') else ' x'} {tmp_path}/f")
            assert why, f"{program} {option} ({line.strip()}) passes readonly.check"
