"""Text to and from a model, for every layer: valid text at the boundaries (`valid`), prompts
as templates (`prompt_templates`), JSON read from a model's output (`json_extract`)."""
