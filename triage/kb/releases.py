"""A known bug's releases: which releases of each package have the defect, and which fixed it.

A known_bug rule carries `releases` (rules/schema.json): `decided_by` says whose release decides
(`load`: the release that runs the failing load or conversion; `save`: the release that wrote the
checkpoint; `either`: a script saved with the checkpoint or the installed one, whichever ran), and
per package (deepspeed, torch, transformers, accelerate) `affected`, a PEP 440 specifier set, and
`fixed`, the first release without the defect, or null while no fixed release exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

PACKAGES = ("deepspeed", "torch", "transformers", "accelerate")
NO_FIX = "no fixed release yet"


@dataclass(frozen=True)
class PackageRange:
    package: str
    affected: SpecifierSet
    fixed: Version | None
    checked: str
    written: str = ""  # `affected` as the rule writes it (SpecifierSet sorts its clauses)

    def has_defect(self, version: str | None) -> bool | None:
        """True/False for a release; None when the release is unknown or not a PEP 440 version."""
        parsed = parse_version(version)
        if parsed is None:
            return None
        # prereleases count: a 0.17.0rc1 carries the code of the release it precedes
        return self.affected.contains(parsed, prereleases=True)

    def describe(self) -> str:
        return f"{self.package} {self.written or self.affected}; " + (f"fixed in {self.fixed}" if self.fixed else NO_FIX)


@dataclass(frozen=True)
class BugReleases:
    decided_by: str
    packages: tuple[PackageRange, ...]

    def package(self, name: str) -> PackageRange | None:
        return next((p for p in self.packages if p.package == name), None)


def parse_version(version) -> Version | None:
    if not isinstance(version, str):
        return None
    try:
        return Version(version.split("+")[0].strip())
    except InvalidVersion:
        return None


def of_rule(data: dict) -> BugReleases | None:
    """The rule's releases (validated by `problems` first), or None when it gives none."""
    spec = data.get("releases")
    if not spec:
        return None
    packages = tuple(PackageRange(name, SpecifierSet(entry["affected"]),
                                  Version(entry["fixed"]) if entry.get("fixed") else None, entry["checked"],
                                  entry["affected"])
                     for name, entry in spec.items() if name in PACKAGES)
    return BugReleases(spec["decided_by"], packages)


def problems(rule: dict):
    """(json path, text) for each `releases` entry that is not what the schema cannot say: a valid
    specifier set, a valid fixed release outside it, and known_bug rules only."""
    spec = rule.get("releases")
    if spec is None:
        return
    if rule["category"] != "known_bug":
        yield ("releases",), (f"releases is for known_bug rules; this rule is {rule['category']}. "
                              "Remove it, or make the rule a known_bug")
    for name in PACKAGES:
        entry = spec.get(name)
        if entry is None:
            continue
        where = ("releases", name)
        try:
            affected = SpecifierSet(entry["affected"])
        except InvalidSpecifier as exc:
            yield where + ("affected",), (f"{name} affected {entry['affected']!r} is not a PEP 440 specifier set "
                                          f"({exc}). Write one like '>=0.10.2,<0.16.0'")
            continue
        if not str(affected):
            yield where + ("affected",), (f"{name} affected is empty. Name the releases that have the defect, "
                                          "e.g. '>=0.10.2'")
        fixed = entry.get("fixed")
        if fixed is None:
            continue
        version = parse_version(fixed)
        if version is None or fixed != fixed.strip():
            yield where + ("fixed",), (f"{name} fixed {fixed!r} is not a PEP 440 version. Write the first release "
                                       f"without the defect (0.16.0), or null for {NO_FIX}")
        elif affected.contains(version, prereleases=True):
            yield where + ("fixed",), (f"{name} fixed {fixed} is inside affected {affected}. The fixed release "
                                       "has no defect: end affected below it (<{fixed})".replace("{fixed}", fixed))
