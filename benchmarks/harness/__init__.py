"""What the benchmark groups and the tests share: command-line pieces, isolated Ray heads and a local Ray, synthetic
learner batches, the torch baseline, the toy reward, and where a result is published."""
