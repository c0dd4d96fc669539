"""Reverse-mode automatic differentiation whose every value and gradient is rounded
by the current precision policy (``fpsim.precision``)."""
# Tensor declares the operators bound here (for type checkers); mypy checks each binding
# against that declaration, but would refuse assigning to a method at all:
# mypy: disable-error-code="method-assign"

from collections.abc import Callable
from typing import Any

from fpsim.autograd import dot, losses, normalization, pointwise, reductions, shape
from fpsim.autograd.cast import cast, to
from fpsim.autograd.tensor import Tensor, as_tensor, grad_enabled, no_grad, tensor

# tensor() is defined in fpsim.autograd.tensor so that the documentation tools (griffe),
# which see that submodule where Python sees the function, find it there.


def _reflected(op: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    return lambda self, other: op(other, self)


Tensor.__add__ = pointwise.add
Tensor.__radd__ = _reflected(pointwise.add)
Tensor.__sub__ = pointwise.sub
Tensor.__rsub__ = _reflected(pointwise.sub)
Tensor.__mul__ = pointwise.mul
Tensor.__rmul__ = _reflected(pointwise.mul)
Tensor.__truediv__ = pointwise.div
Tensor.__rtruediv__ = _reflected(pointwise.div)
Tensor.__neg__ = pointwise.neg
Tensor.__pow__ = pointwise.pow
Tensor.__matmul__ = dot.matmul
Tensor.__rmatmul__ = _reflected(dot.matmul)
Tensor.__getitem__ = shape.getitem
Tensor.reshape = shape.reshape
Tensor.transpose = shape.transpose
Tensor.T = property(lambda self: shape.transpose(self))  # type: ignore[assignment]
Tensor.sum = reductions.sum
Tensor.mean = reductions.mean
Tensor.argmax = reductions.argmax
Tensor.relu = pointwise.relu
Tensor.tanh = pointwise.tanh
Tensor.sigmoid = pointwise.sigmoid
Tensor.exp = pointwise.exp
Tensor.log = pointwise.log
Tensor.to = to


__all__ = ["Tensor", "as_tensor", "cast", "dot", "grad_enabled", "losses", "no_grad",
           "normalization", "pointwise", "reductions", "shape", "tensor"]
