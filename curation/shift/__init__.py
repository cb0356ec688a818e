"""The model-free shift audit (how much a classifier that never sees the model separates the labels) and debias."""
