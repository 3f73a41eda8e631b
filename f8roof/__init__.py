"""f8roof: should this linear train in float8? Measured answers for torch.compile."""

__version__ = "0.1.0"
