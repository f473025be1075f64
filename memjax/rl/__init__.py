"""memjax.rl"""
