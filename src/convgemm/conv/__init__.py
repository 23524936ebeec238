"""The convolution layer: layouts, loaders and algorithms on top of the matmul blocks."""
