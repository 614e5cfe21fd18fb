"""Tests of the cluster grid and the schedulers, against a real Slurm (slurm_cluster.py) and golden job scripts."""
