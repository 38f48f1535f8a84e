"""Concept demos: one interview concept each, shown on real processes, with named checks."""
