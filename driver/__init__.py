"""The driver of ``trainer.py``: the run (``training_run``), one step's phases (``collect``, ``step``, ``pipeline``,
``dynamic_sampling``, ``remax``), their calls on the role groups (``phases``, ``role_group``,
``launch``), the step's derived metrics (``step_metrics``), checkpoints, validation, the timer, the terminal, the
dashboard gauges, and the command lines (``cli``, ``evaluate``).
"""
