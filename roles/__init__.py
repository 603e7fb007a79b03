"""Relay's Ray actors, one module per role (``rollout``, ``actor_ref``, ``reward`` with ``reward_solver``,
``learner``), and ``env``: the process environment each actor runs in (threads, devices, logs, memory figures)."""
