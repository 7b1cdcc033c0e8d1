"""`ds-triage batch`: the stream's incidents over a fleet's stored logs, on Apache Spark.

    files (a glob, a directory; local, HDFS, S3, any Hadoop filesystem)
        --spark.py: the text source, one row a line, with its file and split-->
        rows.py: each line decoded into records (stream/records.py), keyed by the stream
            key (a plain line: its file, one job a file), binary files set aside
        --shuffle by stream key, sorted by (file, split, row)-->
        windows.py: each stream's records through stream/assemble.py, each closed window
            through stream/emit.py (classify), line numbers and files put back
        --spark.py: incidents (JSON lines or Parquet), the category x job x day summary

rows.py and windows.py are plain Python (no pyspark): Spark calls them on its executors.
Only spark.py imports pyspark, and only when `batch` runs.
"""
