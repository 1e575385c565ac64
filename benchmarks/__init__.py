"""Speed, scale and accuracy measurements with machine-readable (JSON lines) output."""
