"""What launch.py does, here, on this machine: one composed config run as a cell, and a local sweep around it.

    launching  launch_cell(cfg): one cell under any Hydra launcher; a cluster preset becomes a sweep of one
    callbacks  Hydra callbacks (conf/config.yaml): validate every cell before a sweep runs, write its report at the end
    progress   a local sweep's cell i of n, done, time left
"""
