"""Multi-turn, tool-calling rollouts: the call format, a trajectory's tokens and masks, and the agent loop.

Pure code (no Ray): the rollout role runs :func:`relay.agent.loop.run_agent_loop` with its engine and a function
that sends tool calls to the ``tools`` role.
"""
