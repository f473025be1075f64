"""memjax.sampling"""
