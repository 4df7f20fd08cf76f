"""The memory store: rows, schema and the connection that can load sqlite-vec."""
