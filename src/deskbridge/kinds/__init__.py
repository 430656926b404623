"""Workspace kinds: each folder is one kind (pvf, markdown, sage) behind the core's store interface."""
