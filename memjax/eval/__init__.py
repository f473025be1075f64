"""memjax.eval"""
