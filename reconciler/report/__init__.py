"""Rendering results for people (text, markdown for PR comments) and machines (JSON)."""
