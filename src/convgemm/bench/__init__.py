"""The benchmark suite: shapes as data, a runner that times against cuDNN, and reports."""
