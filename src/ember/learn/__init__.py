"""Learning loop: lessons from agents' own session logs, written back into marker blocks."""
