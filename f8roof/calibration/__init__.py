"""The calibration file: its format (file) and how measurements become one (fitting)."""
