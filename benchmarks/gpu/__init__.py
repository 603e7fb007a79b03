"""The learner on a GPU: step time, throughput, MFU and peak memory beside the torch baseline, with no Ray or vLLM."""
