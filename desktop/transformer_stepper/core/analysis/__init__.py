"""Readings of a trace: compare, measures, readouts, attribution, differences, provenance, the guided walks' numbers."""
