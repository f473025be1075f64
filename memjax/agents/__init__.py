"""memjax.agents"""
