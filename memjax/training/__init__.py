"""What SFT and RL share: typed loop configs, train states, checkpoint/resume, logging, the loop."""
