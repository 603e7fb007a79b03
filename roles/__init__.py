"""Relay's Ray actors, one module per role: rollout, actor_ref, reward, learner."""
