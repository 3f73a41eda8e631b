"""Memory as torch itself counts it: the checks of training/memory.py (a step's peak, what a
compiled block saves and what it holds while it runs)."""
