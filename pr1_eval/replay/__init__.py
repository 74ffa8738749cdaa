"""Offline replay of test-time controllers over recorded branches (``pr1-eval replay``)."""
