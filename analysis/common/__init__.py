"""What every surface of the analysis shares: the completeness table, untrusted text, defaults, the
first real input."""
