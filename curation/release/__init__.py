"""A versioned release: its layout and manifest, the passes over blocks, and the files it is written as."""
