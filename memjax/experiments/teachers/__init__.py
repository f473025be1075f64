"""Scripted teachers: SFT trajectories for both papers' roles, written by oracles that read the
data's ground truth, or by a model (`model_teacher`)."""
