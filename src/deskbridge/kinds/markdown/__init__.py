"""The markdown workspace kind."""
