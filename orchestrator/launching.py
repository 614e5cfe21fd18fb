"""Older name of orchestrator.sweep.launching, kept for the jobs of grids launched before the packages: their
pickled task (launch.py's main, stored by value) calls `launch_cell` from this module."""
from orchestrator.sweep.launching import check_command_line, launch_cell  # noqa: F401 - the names old tasks hold
