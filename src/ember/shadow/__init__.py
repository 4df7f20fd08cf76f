"""Shadow memory: facts extracted from the still-hot prompt cache by the context that just
spoke (seed 000, adapted to a proxy: ``docs/architecture.md``)."""
