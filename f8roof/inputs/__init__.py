"""What the user hands in besides options: shapes and measured gemm tables."""
