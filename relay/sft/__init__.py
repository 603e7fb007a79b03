"""A supervised warm start's data: traces and the learner batches made of them."""
