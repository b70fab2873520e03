"""server/decoders/tree"""
