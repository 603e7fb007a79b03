"""Relay core: everything that needs no Ray."""
