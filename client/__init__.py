"""shoal.client."""
