"""Tasks: what a run trains on (rows, prompts, grading, evaluation)."""
