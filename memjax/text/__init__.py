"""Text to and from a model, for every layer: prompts as templates, JSON read from its output."""
