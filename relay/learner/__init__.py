"""The JAX/flax/optax GRPO learner (no Ray)."""
