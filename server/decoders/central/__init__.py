"""Central-model decoders (seeds 000 and 003): the curator's math."""
