"""Menus of the main window: models (recent, found), Help, session files."""
