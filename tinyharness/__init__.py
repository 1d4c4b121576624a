"""tinyharness: a small agent harness for local models (Ollama and any OpenAI-compatible server)."""

__version__ = "0.1.0"
