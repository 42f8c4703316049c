"""``turnlog run``: an interactive terminal session against a real model."""
