"""Reward scoring: answer extraction (``answer``), math-verify grading (``grader``), the graders' shared settings
(``grade_settings``), the grader process pool (``pool``), the blocklist, solver-mode prompts (``solver_prompt``),
user functions and a toy reward.

Import the submodules directly; this package imports nothing, so the light ones (``answer``, ``grade_settings``,
``solver_prompt``, ``user_function``) do not pull in math-verify.
"""
