"""Each catalogued raise site's message as a person would paste it (issue 17): the template of the
message index (rules/load-site-messages.json, read from DeepSpeed's and torch's source) with its
placeholders filled by values of the kind each names: paths for paths, counts for counts."""

from __future__ import annotations

from triage.kb.fill import fill
from triage.kb.messages import SiteMessage

__all__ = ["fill", "pasted"]


def pasted(site: SiteMessage, with_type: bool) -> str:
    """The message pasted alone: `Type: message`, or the message with its type cut off."""
    message = fill(site.template)
    return f"{site.short_exception}: {message}" if with_type else message
