"""What the executors run (plain Python, no pyspark): spark.py hands these to Spark.

A row is (file, its content or None): a local file (`file:`) is read here, in blocks
(source.py); a file elsewhere comes with the content Spark read.
"""

from __future__ import annotations

from triage.batch import windows
from triage.batch.files import scan_file
from triage.batch.route import Router
from triage.batch.source import blocks, chunks
from triage.batch.streams import assemble_stream
from triage.stream.records import Decoder


def first_pass(setup, rows):
    """On an executor: each file through files.scan_file; its own stream's incidents, the facts."""
    fields, limits, rules_dir, extra_rules, docs_url = setup
    _, prefilter, classify = windows.tools(rules_dir, docs_url, extra_rules)
    decoder = Decoder(*fields)
    for path, content in rows:
        closed: list = []
        for item in scan_file(path, chunks(path, content), decoder, prefilter, limits, closed):
            if item[0] == "window":
                for incident in windows.incidents([item[1]], [path], classify, ((windows.FILE_FIELD, path),)):
                    yield ("incident", incident)
            else:
                yield item
    yield ("stats", dict(decoder.stats))


def route_pass(fields, plan, rows):
    """On an executor: the candidate streams' lines of each file (route.py), keyed by stream."""
    keys, literals, order = plan
    router = Router(literals, Decoder(*fields), keys)
    for path, content in rows:
        for index, lines, numbers in router.route(blocks(path, content)):
            yield index, (order[path], path, lines, numbers)


def stream_pass(setup, keys, item):
    """On an executor: one candidate stream's lines from every file -> its incidents (streams.py)."""
    fields, limits, rules_dir, extra_rules, docs_url = setup
    index, parts = item
    _, prefilter, classify = windows.tools(rules_dir, docs_url, extra_rules)
    return assemble_stream(keys[index], parts, Decoder(*fields), prefilter, limits, classify)
