"""The chat's read-only promise, program by program (issues 20.4 and 40.10).

`sort -o FILE` and `uniq IN OUT` used to pass `readonly.check` and write files. Each program is on
an allow-list with its options (triage.chat.run_policy.PROGRAMS), matched whole; the last test
reads each program's --help to keep every option that writes, runs or sets something off it.
tests/hostile/test_chat_run.py runs the hostile commands of issue 40 through the chat.
"""

import re
import shutil
import subprocess

import pytest

from triage.chat import readonly, run_policy


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("b,2\na,1\na,1\n")
    return path


def context(tmp_path, **kw):
    return readonly.Context(root=str(tmp_path), **kw)


@pytest.mark.parametrize("command", [
    "sort -o {out} {src}", "sort -uo{out} {src}", "sort --output={out} {src}", "sort --output {out} {src}",
    "sort --out={out} {src}", "sort -T {dir} {src}", "sort --compress-program=touch {src}",
    "sort --files0-from={src}", "uniq {src} {out}", "uniq -c {src} {out}", "uniq -f 1 {src} {out}",
    "file -C -m {src}", "file --compile -m {src}", "file -p {src}", "hostname ds-triage-test", "hostname -F {src}",
    "hostname -b ds-triage-test", "grep -r a {dir}", "grep -f {src} {src}", "du -X {src} {dir}", "df --sync",
    "dmesg -C", "dmesg -c", "sha256sum -c {src}", "findmnt --poll", "ls --colo=never {dir}",
])
def test_writing_options_of_readers_are_refused(command, src, tmp_path):
    line = command.format(src=src, out=tmp_path / "out.txt", dir=tmp_path)
    why = readonly.check(line, context(tmp_path))
    assert why and "read-only" in why, (line, why)
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("command", [
    "sort -k2,2nr -t, {src}", "sort -t o {src}", "sort -S 10M --parallel=2 -u {src}", "sort -- {src}",
    "uniq -c {src}", "uniq -f 1 -s 2 {src}", "uniq --all-repeated=separate {src}", "file -b {src}",
    "hostname", "hostname -s", "grep -n -A3 '\"b\\|a' {src}", "grep -c -e a {src}", "head -2 {src}", "wc -l {src}",
    "find {dir} -maxdepth 1 -type f -size 0 -ls", "find {dir} -name '*.txt' -printf '%s %p\\n'", "ls -la {dir}",
    "stat -c %s {src}", "du -sh {dir}", "df -h {dir}", "od -An -c -N 4 {src}", "sha256sum {src}", "id", "whoami",
])
def test_reading_options_still_run(command, src, tmp_path):
    line = command.format(src=src, dir=tmp_path)
    assert readonly.check(line, context(tmp_path)) is None, line
    before = sorted(p.name for p in tmp_path.iterdir())
    run = readonly.run(line, context(tmp_path))
    assert run.returncode == 0, run.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside the input


@pytest.mark.parametrize("command, why", [
    ("rm -rf {dir}", "`rm` is not on the chat's list of read-only programs: it writes"),
    ("python -m pip list", "`python` is not on the chat's list of read-only programs: an interpreter"),
    ("find {dir} -name x -delete", "find -delete deletes files"),
    ("env rm x", "`env` is not on the chat's list of read-only programs: it runs another program"),
    ("ls $(rm x)", "it uses `$` (expansion)"),
    ("ls \"$(rm x)\"", "it uses `$` (expansion) in double quotes"),
    ("cat x > y", "it uses `>` (a redirection)"),
    ("ls /tmp;rm x", "it uses `;`"),
    ("ls /tmp\nrm x", "it spans lines"),
    ("ls 'unbalanced", "unbalanced quote"),
    ("git -C . lfs ls-files", "`git` is not on the chat's list"),
    ("/bin/ls /", "give a program by its name"),
    ("ds-triage repair config . --apply", "only ds-triage probe, triage, classify, runbook, verify, inspect run"),
    ("ds-triage probe . --reproduce --trust-checkpoint", "--reproduce is not one of the read-only options"),
    ("ds-triage probe . --repro", "--repro is not one of the read-only options"),
    ("ds-triage verify . --junit=x.xml", "--junit is not one of the read-only options"),
    ("python -m triage.probe.safe_pickle /etc/passwd", "it reads /etc/passwd, outside the checkpoint"),
    ("cat /etc/passwd", "it reads /etc/passwd, outside the checkpoint"),
    ("cat {dir}/../x", "outside the checkpoint"),
    ("ls /etc/*", "is a glob outside the checkpoint"),
    ("grep a.* {dir}/in.txt", "`a.*` has an unquoted glob character"),
    ("ulimit -v", "it is a shell built-in"),
    ("grep -n x \"$DS_CONFIG\"", 'it still has "$DS_CONFIG" in it'),
    ("ls --all=x {dir}", "ls --all takes no value"),
    ("ds-triage probe --deep=yes {dir}", "ds-triage --deep takes no value"),
    ("python3.11 -c 'print(1)'", "`python3.11` is not on the chat's list of read-only programs: an interpreter"),
])
def test_readonly_refuses(command, why, tmp_path):
    assert why in (readonly.check(command.format(dir=tmp_path), context(tmp_path)) or ""), command


def test_content_is_read_only_inside_the_checkpoint_the_config_and_cgroup(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest").write_text("global_step3")
    (tmp_path / "ckpt" / "out").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_text("not the checkpoint's")
    (tmp_path / "ds_config.json").write_text('{"zero_optimization": {"stage": 2}}')
    ctx = readonly.Context(root=str(tmp_path / "ckpt"), config=str(tmp_path / "ds_config.json"))
    assert readonly.run(f"cat {tmp_path}/ckpt/latest", ctx).output == "global_step3"
    assert '"stage": 2' in readonly.run(f"grep -n stage {tmp_path}/ds_config.json", ctx).output
    assert "outside the checkpoint" in readonly.check(f"cat {tmp_path}/ckpt/out", ctx)  # the link is followed
    assert "out of the checkpoint" not in (readonly.check(f"ls -la {tmp_path}/ckpt/*", ctx) or "")
    assert "give it (/set ckpt PATH)" in readonly.check(f"cat {tmp_path}/ckpt/latest")
    assert "give it (/set ckpt PATH)" in readonly.check("cat /x", readonly.Context(root="/"))  # "/" is no root
    assert readonly.check("cat /sys/fs/cgroup/memory.max", ctx) is None


def test_run_caps_output_stops_at_the_time_limit_and_strips_escapes(tmp_path):
    ctx = context(tmp_path)
    (tmp_path / "big").write_bytes(b"a" * 200_000)
    run = readonly.run(f"cat {tmp_path}/big", ctx, cap=1000)
    assert run.truncated and len(run.output) == 1000 and run.returncode is None
    run = readonly.run(f"tail -f {tmp_path}/big -n 0", ctx, timeout=0.5)
    assert run.returncode is None and not run.truncated
    (tmp_path / "colour").write_bytes(b"\x1b[2Jcleared\x07\n")
    run = readonly.run(f"cat {tmp_path}/colour", ctx)
    assert "\x1b" not in run.output and "\x07" not in run.output and "cleared" in run.output
    assert readonly.run(f"ls {tmp_path}/absent", ctx).returncode not in (0, 126)
    refused = readonly.run(f"cat {tmp_path}/big > {tmp_path}/copy", ctx)  # run() checks again
    assert refused.returncode == 126 and refused.output.startswith("not run: it uses `>`")
    assert not (tmp_path / "copy").exists()


# What a --help says of an option that writes a file, runs a program or sets system state.
# (Words like "delete" are left out: for tr and basename they mean characters, not files.)
WRITES = re.compile(r"write (?:\w+ )?to FILE|with PROG|for temporaries|compile|set (?:default )?host ?name|"
                    r"set NIS|clear|console|preserve|sandbox|--sync|--check(?![-\w])|--file[ =]|files0?-from|"
                    r"--tab-file|exclude-from|--poll", re.I)
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@pytest.mark.parametrize("program", sorted(run_policy.PROGRAMS))
def test_every_reader_option_that_writes_is_refused(program, tmp_path):
    """Each --help line that describes writing, running or setting names options the chat refuses."""
    if shutil.which(program, path=readonly.SAFE_PATH) is None:
        pytest.skip(f"{program} is not installed here")  # nvidia-smi on a machine with no GPU
    done = subprocess.run([program, "--help"], capture_output=True, text=True,
                          env={"LC_ALL": "C", "PATH": readonly.SAFE_PATH})
    text = done.stdout + done.stderr
    assert len(text) > 40, f"{program} --help printed nothing to check"
    (tmp_path / "f").write_text("x\n")
    for line in text.splitlines():
        if not WRITES.search(line) or not line.strip().startswith(("-", "Usage:")):
            continue  # continuation lines name options only in passing
        named = re.split(r"(?<=\S)\s{2,}", line.strip(), maxsplit=1)[0]  # the options, not the prose
        for option in OPTION.findall(named):
            if option in ("--help", "--version") or option in ("--check", "-c", "-C") and program == "sort":
                continue  # sort --check only reports whether its input is sorted
            why = readonly.check(f"{program} {option}{'=x' if option.startswith('--') else ' x'} {tmp_path}/f",
                                 context(tmp_path))
            assert why and option in why, f"{program} {option} ({line.strip()}) passes readonly.check: {why}"
