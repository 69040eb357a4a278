"""The explanation beside every tab's plots: the texts (content in resources/), the panel that shows them, and the small English they are said in."""
