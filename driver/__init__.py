"""The driver of ``trainer.py``: the run (``training_run``), one step's phases (``collect``, ``step``, ``pipeline``,
``dynamic_sampling``, ``remax``) and their calls into the roles (``phases``, ``fanout``, ``launch``, ``recovery``),
checkpoints, validation, the timer, the terminal, the dashboard gauges, and the command lines (``cli``, ``evaluate``).
"""
