"""Both papers reproduced end to end: stages (memjax jobs chained by their workdirs), the
pipelines of base -> SFT -> RL with held-out evaluations, and tables in the papers' shapes."""
