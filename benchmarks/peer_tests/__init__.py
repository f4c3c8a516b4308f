"""Peer libraries' own test suites run against unigraph's classes (see pyg_swap.py)."""
