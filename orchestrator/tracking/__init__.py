"""The tracking store: one MLflow run per cell, fed through a durable local queue, and read back.

    tracker         Tracker: one MLflow run per cell, every record queued first and sent in the background
    mode            direct or single_writer (one writer imports the queues): chosen by the store's filesystem
    queue           CellQueue: a cell's fsynced record queue, and the store's register of queues
    writer          StoreWriter: sends a cell's records to MLflow, idempotently (a record is never logged twice)
    importer        the single writer: imports every registered queue under the store's writer lock
                    (`python -m orchestrator.tracking.importer`)
    reads           a grid's cell runs and metric histories read at once (SQL on SQLite, else MLflow's API)
    system_metrics  MLflow's system metrics through the cell's queue (system_metrics=true)
"""
