"""Continual observation (issue 18, Build 5): the binary-tree mechanism and the greedy over its sums."""
