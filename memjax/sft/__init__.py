"""Supervised fine-tuning on chat trajectories (the cold start before RL)."""
