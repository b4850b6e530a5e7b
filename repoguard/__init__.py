"""repoguard: protect per-secret reconstruction bounds while fine-tuning a code model on a monorepo."""
__version__ = "0.1.0"
