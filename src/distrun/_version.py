"""distrun's version (azure-ai-ml keeps its own in `azure.ai.ml._version`); pyproject.toml holds the same."""

VERSION = "0.1.0"
__version__ = VERSION
