"""triage/kb/site_history.json: the releases that have each load-path raise site (issue 18, point 2)."""

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


def test_index_reads_deepspeed_0_10_to_the_installed_release_and_torch_on_both_sides_of_2_6():
    scanned = site_history.scanned()
    assert scanned["deepspeed"][0].startswith("0.10.") and scanned["deepspeed"][-1] == metadata.version("deepspeed")
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
