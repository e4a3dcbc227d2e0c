"""Carrying a plan out: the code that submits, cancels, writes and journals."""
