"""Compression of tool output: the long outputs of an agent's tools shortened the first time
they reach the provider, replayed byte for byte on every later request, the original a tool
call away (``ember_retrieve``)."""
