"""What every part of the orchestrator shares, at the bottom of its layers (no import of the rest):

    paths        default locations of data/, checkpoints/ and the MLflow store; the repository's root
    filesystems  the filesystem a path lies on (local or network), which decides how the tracking store is written
    cellfiles    the files of a cell's folder (done.json, events.jsonl, the tracking queue, ...) that other tools read
    interrupts   Ctrl-C and SIGTERM counted as stop requests by a process that stops its children itself
"""
