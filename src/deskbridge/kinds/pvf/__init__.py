"""The pvf workspace kind."""
