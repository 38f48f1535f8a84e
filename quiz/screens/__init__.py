"""Screens of the quiz app."""
