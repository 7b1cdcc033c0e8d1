"""`ds-triage stream` and `serve`: classify logs as they flow from log aggregation.

    raw bytes --scan.py--> lines --records.py--> records (stream key, text, time)
        --assemble.py--> one window of lines per incident and stream
        --emit.py--> classify(window) -> one JSON line (docs/schemas/stream.schema.json)

prefilter.py decides from the raw bytes which lines can matter (derived from the parser
and the rules by literals.py); pipeline.py wires the parts, http.py serves them.
"""
