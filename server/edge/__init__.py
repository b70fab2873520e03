"""server/edge"""
