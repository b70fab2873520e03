"""server/decoders"""
