"""Units of the placement and memory figures."""

GIB = 2**30  # bytes in a GiB: every memory figure is printed in GiB
