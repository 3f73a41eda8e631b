"""GPU presets (datasheet ceilings, sources) and which scaled gemms each runs."""
