"""The sage workspace kind."""
