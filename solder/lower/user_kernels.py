"""User-written Triton kernels (triton_kernel_wrapper_functional / _mutation): not yet lowered;
they run through the fallback path (an ATen-level call of the higher-order op)."""
