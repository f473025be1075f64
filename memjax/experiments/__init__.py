"""The laboratory: the papers' reproduction on CPU and what only it needs.

The reproduction pipeline (`reproduce`), the scripted SFT teachers (`teachers`), the synthetic
conversation generator (`synthetic`). Nothing else in memjax imports this package; jobs reach
it by name through `memjax.jobs`.
"""
