"""memjax.data"""
