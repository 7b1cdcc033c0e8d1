"""`ds-triage batch`: the stream's incidents over a fleet's stored logs, on Apache Spark.

    files (a glob, a directory; local, HDFS, S3, any Hadoop filesystem), each read whole
        --spark.py: files.py: each file through stream's block scanner (stream/scan.py);
            its own stream's incidents (plain logs: one job a file) final, binary files set
            aside; the streams records name (pods) that may open an incident, and their literals
        --spark.py, only if there are such streams: route.py: their raw lines, found by literal
            --shuffle by stream-->
        streams.py: each stream's lines in input order through the same scanner and assembler
        --windows.py: classify (stream/emit.py), files and line numbers put back
        --spark.py: incidents (JSON lines or Parquet), the category x job x day summary

files.py, route.py, streams.py and windows.py are plain Python (no pyspark): Spark calls them
on its executors. Only spark.py imports pyspark, and only when `batch` runs.
"""
