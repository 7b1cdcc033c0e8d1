"""`verify --junit FILE`: the verify report as JUnit XML, for a CI system's test view.

One <testsuite> for the checkpoint: a <testcase> per probe (a <failure> when it found a problem,
<skipped> when it could not tell), one for the manifest and one for the trust walk. The exit code
is the gate; the XML is what the CI page shows about it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from triage.probe.result import CONFIRMED, INCONCLUSIVE


def junit_xml(report) -> str:
    ckpt = report.probe.ctx.ckpt
    name = f"ds-triage verify {ckpt.root or ckpt.given}" + (f" ({ckpt.tag})" if ckpt.tag else "")
    suite = ET.Element("testsuite", name=name)
    for r in report.probe.results.values():
        case = ET.SubElement(suite, "testcase", classname="ds-triage.probe", name=r.name)
        if r.status == CONFIRMED:
            failure = ET.SubElement(case, "failure", message=r.summary, type="probe")
            failure.text = "\n".join(r.evidence)
        elif r.status == INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=f"inconclusive: {r.summary}")
    manifest = ET.SubElement(suite, "testcase", classname="ds-triage.manifest", name="manifest")
    if report.manifest is None:
        ET.SubElement(manifest, "skipped", message=report.manifest_note)
    elif report.manifest.problems:
        failure = ET.SubElement(manifest, "failure", message=f"{len(report.manifest.problems)} file(s) differ "
                                f"from {report.manifest.path}", type="manifest")
        failure.text = "\n".join(report.manifest.problems)
    if report.trust is not None:
        trust = ET.SubElement(suite, "testcase", classname="ds-triage.trust", name="trust")
        if report.trust.untrusted:
            failure = ET.SubElement(trust, "failure", message="file(s) not verified safe", type="trust")
            failure.text = report.trust.describe()
    cases = list(suite)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    suite.set("errors", "0")
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
