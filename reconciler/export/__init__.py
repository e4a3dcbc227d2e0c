"""Provenance in formats other tools read: RO-Crate."""
