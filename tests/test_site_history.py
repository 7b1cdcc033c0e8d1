"""triage/kb/site_history.json: the releases that have each load-path raise site (issue 18, point 2)."""

import re
from importlib import metadata

from triage.kb import site_history
from triage.kb.sites import Site, site_key


def test_ranges_are_runs_of_consecutive_releases_read():
    order = ["0.10.3", "0.11.2", "0.12.6", "0.13.5", "0.14.5"]
    assert site_history.ranges(["0.10.3", "0.11.2", "0.12.6"], order) == ["0.10.3-0.12.6"]
    assert site_history.ranges(["0.10.3", "0.12.6", "0.13.5"], order) == ["0.10.3", "0.12.6-0.13.5"]
    assert site_history.ranges(["0.14.5"], order) == ["0.14.5"]
    assert site_history.ranges([], order) == []


def test_release_order_is_numeric():
    assert sorted(["0.9.5", "0.10.3", "0.19.8", "0.3.16"], key=site_history.release_key) == \
        ["0.3.16", "0.9.5", "0.10.3", "0.19.8"]


def test_index_reads_deepspeed_0_3_to_the_installed_release_and_torch_on_both_sides_of_2_6():
    scanned = site_history.scanned()
    assert scanned["deepspeed"][0].startswith("0.3.") and scanned["deepspeed"][-1] == metadata.version("deepspeed")
    minors = {site_history.release_key(v)[:2] for v in scanned["deepspeed"]}
    assert {(0, minor) for minor in range(3, 20)} <= minors  # every minor line from 0.3 to 0.19
    torches = [site_history.release_key(v) for v in scanned["torch"]]
    assert min(torches) < (2, 6) <= max(torches)


def test_the_installed_release_rebuilds_its_part_of_the_index(load_sites):
    """Every site of the installed deepspeed and torch is in the index with that release, and the index
    has no site of that release that the installed source lacks."""
    sites, _ = load_sites
    versions = {"deepspeed": metadata.version("deepspeed"), "torch": metadata.version("torch")}
    index = site_history.load()
    for site in sites:
        releases = site_history.releases_of(site)
        assert releases is not None, site
        assert any(_holds(r, versions[site.package], index["packages"][site.package]["releases"]) for r in releases), site
    have = {site_key(s) for s in sites}
    for package, data in index["packages"].items():
        if package not in versions:
            continue  # a project read from its releases or a snapshot only (triage.kb.projects)
        for e in data["sites"]:
            if any(_holds(r, versions[package], data["releases"]) for r in e["releases"]):
                assert (package, e["file"], e["function"], e["exception"],
                        e["message"] if e["message"] is not None else e["code"]) in have, e


def _holds(run: str, version: str, order: list[str]) -> bool:
    first, _, last = run.partition("-")
    last = last or first
    return order.index(first) <= order.index(version) <= order.index(last)


def test_older_only_sites_are_the_ones_the_installed_release_lacks(load_sites):
    sites, _ = load_sites
    older = site_history.older_only(sites)
    have = {site_key(s) for s in sites}
    assert older and all(site_key(site) not in have for site, _ in older)
    # torch 2.6 reworded the weights-only refusal: the 2.5 wording is an older-only variant
    texts = [(site.package, site.message or "", releases) for site, releases in older]
    assert any(p == "torch" and m.startswith("Unsupported global") for p, m, _ in texts)


def test_a_site_of_no_release_read_has_no_entry():
    site = Site("deepspeed", "runtime/engine.py", "DeepSpeedEngine.nope", 1, "raise", "ValueError", "never", "raise")
    assert site_history.releases_of(site) is None


def test_the_projects_around_deepspeed_are_read_with_their_releases():
    """Issue 42, item 1: transformers, accelerate, safetensors from their PyPI releases; Megatron-DeepSpeed,
    Megatron-LM and GPT-NeoX from a dated snapshot each; the releases before 0.10 with their own files."""
    from triage.kb.projects import PYPI, REPOSITORIES

    scanned = site_history.scanned()
    for project, (releases, _) in PYPI.items():
        assert scanned[project] == sorted(releases, key=site_history.release_key), project
    for project in REPOSITORIES:
        assert len(scanned[project]) == 1 and re.fullmatch(r"\d{4}-\d{2}-\d{2} [0-9a-f]{7,}", scanned[project][0])
    sites = [(site.package, site.file, site.kind, site.message or "", releases) for site, releases in site_history.every_site()]
    for megatron in ("megatron-deepspeed", "megatron-lm"):
        assert any(p == megatron and k == "assert" and "value from checkpoint ({}) is not equal to the input argument" in m
                   for p, _, k, m, _ in sites), megatron
        assert any(p == megatron and k == "logged" and m.startswith("Unable to load optimizer from checkpoint")
                   for p, _, k, m, _ in sites), megatron
    assert any(p == "megatron-deepspeed" and f.startswith("tools/convert_checkpoint/") for p, f, *_ in sites)
    assert any(p == "gpt-neox" and f.startswith("tools/ckpts/") for p, f, *_ in sites)
    assert any(p == "transformers" and f == "trainer.py" and m.startswith("Can't find a valid checkpoint at")
               for p, f, _, m, _ in sites)
    old_zero = [r for p, f, _, _, r in sites if p == "deepspeed" and f in ("runtime/zero/stage1.py", "runtime/zero/stage2.py")]
    assert old_zero and all(site_history.release_key(run.split("-")[-1]) < (0, 10) for runs in old_zero for run in runs)
