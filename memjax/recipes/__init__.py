"""Paper recipes shared by several config files (configs/*.py stay a few lines each)."""
