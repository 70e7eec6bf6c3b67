"""The turn loop: history -> model -> tool calls -> results -> ... -> answer."""
