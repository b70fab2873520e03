"""server/decoders/sketch"""
