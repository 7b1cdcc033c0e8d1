"""`ds-triage completion`: the script a real bash loads, completing subcommands, options and
choices of this release (made from the parser, so a new option is never missing from it)."""

import subprocess
import sys

from tests.conftest import ROOT

BASH = r'''
source <(ds-triage completion bash)
complete_line() {
  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$1"
  [[ "$1" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  _shtab_ds_triage; printf '%s\n' "${COMPREPLY[@]}"; echo ---
}
complete_line "ds-triage cla"
complete_line "ds-triage verify --ju"
complete_line "ds-triage classify --format "
complete_line "ds-triage probe --stage "
'''


def test_bash_completes_subcommands_options_and_choices(tmp_path):
    shim = tmp_path / "ds-triage"  # the console script, as an installed copy has it
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m triage \"$@\"\n")
    shim.chmod(0o755)
    proc = subprocess.run(["bash", "-c", BASH], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    answers = [block.split() for block in proc.stdout.split("---")[:-1]]
    assert answers == [["classify"], ["--junit"], ["text", "json", "markdown"], ["0", "1", "2", "3"]]


def test_an_unknown_shell_is_a_usage_error(cli):
    proc = cli("completion", "powershell")
    assert proc.returncode == 2 and b"invalid choice" in proc.stderr
