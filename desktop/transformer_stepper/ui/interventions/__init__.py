"""The Interventions and Attribution tabs, the difference map, the provenance dock."""
