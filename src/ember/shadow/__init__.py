"""Shadow memory: facts extracted from the still-hot prompt cache by the context that just
spoke, forked from the client's own last request (``docs/architecture.md``)."""
