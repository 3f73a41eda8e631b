"""Bytes: recipes and variants, the worst/ideal models, block-scaled and grouped recipes' traffic, exact fits of generated code in M, K, N."""
