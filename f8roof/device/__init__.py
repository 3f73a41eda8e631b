"""What runs on a device: calibrate, validate, their accuracy statistics and the checkpointed task runner."""
