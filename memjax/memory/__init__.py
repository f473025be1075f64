"""memjax.memory"""
