"""The three gemms of one linear of shape (M, K, N), each as (m, k, n) of an (m, k) @ (k, n)
product: output (M, K, N), grad_input (M, N, K), grad_weight (N, M, K)."""

from __future__ import annotations

from enum import Enum


class GemmRole(str, Enum):
    OUTPUT = "output"
    GRAD_INPUT = "grad_input"
    GRAD_WEIGHT = "grad_weight"


GEMM_ROLES = (GemmRole.OUTPUT, GemmRole.GRAD_INPUT, GemmRole.GRAD_WEIGHT)


def gemm_dims(role: GemmRole, M, K, N):
    """(m, k, n) of a gemm role for a linear of shape (M, K, N); works on arrays."""
    if role is GemmRole.OUTPUT:
        return M, K, N
    if role is GemmRole.GRAD_INPUT:
        return M, N, K
    return N, M, K


def linear_shape(role: GemmRole, m: int, k: int, n: int) -> tuple[int, int, int]:
    """The linear (M, K, N) whose `role` gemm is (m, k, n): the inverse of `gemm_dims`."""
    if role is GemmRole.OUTPUT:
        return m, k, n
    if role is GemmRole.GRAD_INPUT:
        return m, n, k
    return k, n, m
