"""The one exception type for errors a user can cause (a file, a tensor, a value)."""


class ModelError(Exception):
    """A problem with a model, a file or an input, described in one line that names it."""

    def __str__(self) -> str:  # keep it to one line whatever was passed in
        return " ".join(str(self.args[0]).split()) if self.args else "model error"
