"""Decoding strategies over the engine interface: sequential (plain sampling), fork-join, structured."""
