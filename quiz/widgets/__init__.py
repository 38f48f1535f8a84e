"""Reusable widgets of the quiz app."""
