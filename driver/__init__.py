"""Driver pieces of ``trainer.py`` that need no training loop: CLI, run records."""
