"""server/storage"""
