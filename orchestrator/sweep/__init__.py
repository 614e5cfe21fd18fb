"""What launch.py does, here, on this machine: one composed config run as a cell, and a local sweep around it.

    launching  launch_cell(cfg): one cell under any Hydra launcher; a cluster preset becomes a sweep of one
    callbacks  Hydra callbacks (conf/config.yaml): validate every cell before a sweep runs, write its report at the end
    progress   a local sweep's cell i of n, done, time left (cells one after another)
    gpu_pool   this machine's GPUs and which of them each cell gets; parallel: cells run side by side as processes,
               one progress line; cell_process: one cell in its process; local_launcher: the Hydra launcher of
               cluster=local (side by side on GPUs, else one after another)
"""
