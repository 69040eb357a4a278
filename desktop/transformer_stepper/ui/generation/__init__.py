"""Generation in the app: the Generate bar and its runs."""
