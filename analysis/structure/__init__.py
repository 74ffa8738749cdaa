"""How a model branches: the parallel ratio, where blocks sit, how that drifts over training, and
what a block does (explore or verify)."""
