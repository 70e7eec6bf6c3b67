"""Model providers and the OpenAI-compatible streaming client."""
