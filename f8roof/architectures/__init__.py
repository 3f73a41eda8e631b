"""Model architectures: built-in and Hugging Face configs, and how they train in parallel."""
