"""How fast: Relay against its peers (TRL, a torch baseline, a plain copy) and Relay's own step, engines, learner,
weight sync and grading, each as a ratio to a baseline measured in the same invocation."""
