"""How models train: architectures, parallel plans and local shapes, checkpointing, the sharded block and its fits, the step, torchtitan's names and configs."""
