"""String tables, `.str` files, `n_string.lst` links and pack encodings shared by the PVF families."""
