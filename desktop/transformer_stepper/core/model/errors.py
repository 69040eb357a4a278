"""The one exception type for errors a user can cause (a file, a tensor, a value)."""


class ModelError(Exception):
    """A problem with a model, a file or an input, described in one line that names it."""

    def __str__(self) -> str:
        # keep it to one line whatever was passed in (a library's multi-line reason, a path
        # with a newline), but leave spaces inside a line alone: they may be part of a name
        if not self.args:
            return "model error"
        lines = (line.strip() for line in str(self.args[0]).splitlines())
        return " ".join(line for line in lines if line) or "model error"
