"""Time: gemm models, kernel classes and their rates, the band, collectives, attention, the datasheet and public-measurement time models."""
