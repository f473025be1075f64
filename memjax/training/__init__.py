"""The training core SFT and RL both build on: the train state and its sharded step, the
optimizer, log-probs, loss aggregation, LoRA's train state, checkpoints and resume, host
batches, run reports, and the step loop."""
