"""shoal.shuffler."""
