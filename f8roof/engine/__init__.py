"""One typed answer: options -> configurations -> per-layer rows -> the step; no text (renderers write it)."""
