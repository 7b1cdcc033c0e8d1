"""Rule files for tests: a minimal valid rule, and a rules directory to load."""

import shutil
import textwrap

from tests.conftest import ROOT


def rules_dir(tmp_path, files: dict[str, str]):
    directory = tmp_path / "rules"
    directory.mkdir()
    shutil.copy(ROOT / "rules" / "schema.json", directory / "schema.json")
    for name, text in files.items():
        (directory / name).write_text(textwrap.dedent(text))
    return directory


def valid_rule(rule_id="DS-T001", **over) -> str:
    base = f"""\
        id: {rule_id}
        title: A test rule about a bare assertion
        status: experimental
        category: zero_stage_mismatch
        summary: The checkpoint was saved with another ZeRO stage.
        cause: |
          A test cause, long enough to pass the schema's minimum length for causes.
        signature:
          patterns:
            - exception: AssertionError
              frame: {{file: runtime/state_dict_factory.py, function: check_ckpt_list}}
        verify:
          - command: ls -la {{ckpt}}/{{tag}}
            shows: which shard files the tag holds
        probes: [completeness]
        fix:
          - title: Load with the stage the checkpoint was saved with
            safety: safe
        prevention: [Record the ZeRO stage beside every checkpoint.]
        references:
          - source: deepspeed/runtime/state_dict_factory.py
            function: SDLoaderBase.check_ckpt_list
        false_positives: none known
        examples:
          - expect: match
            log: |
              Traceback (most recent call last):
                File "/x/deepspeed/runtime/state_dict_factory.py", line 112, in check_ckpt_list
                  assert len(self.ckpt_list) > 0
              AssertionError
          - expect: no-match
            log: |
              all good
        """
    for old, new in over.items():
        base = base.replace(old, new)
    return base
