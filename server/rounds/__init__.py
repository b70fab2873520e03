"""server/rounds"""
