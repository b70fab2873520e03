"""deploy/bench"""
