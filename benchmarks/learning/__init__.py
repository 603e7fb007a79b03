"""Does training make the model better: held-out accuracy against wall-clock minutes, Relay beside TRL, the
algorithm menu, LoRA, tools and warm starts, and the task screening and statistics these read their results with."""
