"""Candidates whose trick is a side effect of importing the kernel module.

Each module here stands for a kernel file that, when the project (the focused test, the harness
worker) imports it, reaches into code it does not own. One module per trick, so the side effect
of one never leaks into another candidate's worker.
"""
