"""The driver of ``trainer.py``: the run (``training_run``), one step's phases (``collect``, ``step``, ``pipeline``,
``dynamic_sampling``, ``remax``), the role groups and their calls (``role_group``, ``role_restart``, ``launch``),
the step's derived metrics (``step_metrics``), checkpoints, validation, the timer, the terminal, the dashboard
gauges, and the command lines (``cli``, ``evaluate``).
"""
