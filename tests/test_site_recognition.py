"""Every catalogued message is recognised pasted alone (issue 42, item 2), for every project the
catalogue reads: DeepSpeed (every minor from 0.3), torch, transformers, accelerate, safetensors,
Lightning and its Fabric, PEFT, TRL, Megatron-DeepSpeed, Megatron-LM and GPT-NeoX. The pastes are derived from the catalogue (the
message index, rules/load-site-messages.json): each template filled with values of the kind each
placeholder names, as tests/site_pastes.py does. Recognised means the message index names the
site; a category comes only from a rule covering it (tests/test_site_messages.py checks those)."""

import pytest

from tests.site_pastes import pasted
from triage.classify import messages as site_search
from triage.classify.match import LogView
from triage.kb import messages, site_history
from triage.kb.projects import PYPI, REPOSITORIES
from triage.logs.parse import parse

PROJECTS = ("deepspeed", "torch", *PYPI, *REPOSITORIES)


@pytest.fixture(scope="module")
def index(rules):
    return messages.load(rules.directory, every_site=True)


def _project(site) -> str:
    return site.source.split("/", 1)[0]


def _named(index, text, site) -> bool:
    incident, lines = parse(text)
    return any(hit.site is site for hit in site_search.find_sites(LogView(incident, lines), index))


def test_the_index_holds_every_project_the_history_read(index):
    have = {_project(site) for site in index}
    assert set(site_history.scanned()) == set(PROJECTS)
    assert have == set(PROJECTS), set(PROJECTS) - have


@pytest.mark.parametrize("project", PROJECTS)
@pytest.mark.parametrize("with_type", [True, False], ids=["with type", "type cut off"])
def test_every_catalogued_message_is_recognised_pasted_alone(index, project, with_type):
    tried, missed = 0, []
    for site in index:
        if _project(site) != project or (not with_type and site.needs_type):
            continue  # too little text to tell from other text without its type
        tried += 1
        text = pasted(site, with_type and site.short_exception[:1].isupper())
        if not _named(index, text, site):
            missed.append(f"{site.where}: {text[:120]!r}")
    assert tried and not missed, f"{len(missed)} of {tried} {project} sites not recognised:\n" + "\n".join(missed[:20])


@pytest.mark.parametrize("project", PROJECTS)
def test_every_catalogued_raise_line_is_recognised(index, project):
    """The source line a traceback shows above the message, copied alone."""
    tried, missed = 0, []
    for site in index:
        if _project(site) != project or not site.short_exception[:1].isupper() or \
                site.short_exception in ("AssertionError", "SystemExit"):
            continue  # `raise e`, `assert cond, msg`, logged and collected messages name no type
        tried += 1
        text = f'    raise {site.short_exception}(f"{site.template}")'
        if not _named(index, text, site):
            missed.append(f"{site.where}: {text[:120]!r}")
    assert not missed, f"{len(missed)} of {tried} {project} raise lines not recognised:\n" + "\n".join(missed[:20])


def test_classify_reads_only_the_sites_a_rule_covers(rules, index):
    """A site no rule covers gives classify no hypothesis: the index classify reads leaves it out
    (each site costs a search of every paste), the recognising one holds it."""
    assert rules.sites.sites and all(site.rules for site in rules.sites)
    assert {site.where for site in rules.sites} == {site.where for site in index if site.rules}
    assert len(index) > len(rules.sites)
