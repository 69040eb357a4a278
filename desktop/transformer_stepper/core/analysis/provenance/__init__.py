"""Where does this number come from? Any traced value taken apart into the arithmetic that made it."""
