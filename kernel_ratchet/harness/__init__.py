"""Running an op on shapes: adapter protocol, timing engines, correctness, CSV schema + reader."""
