"""Reinforcement learning on the training core (`memjax.training`): environments, rollouts,
advantages, the policy and value losses, the PPO critic, and the GRPO / PPO trainer."""
