"""What training and inference both run on, below either: the device mesh and the logical-axis sharding rules
(:mod:`partitioning`), Orbax checkpoints (:mod:`checkpointing`), a model's parameter shapes and shardings
(:mod:`params`), and the processes of a multi-host run (:mod:`processes`). An evaluation or a translation imports
these and nothing of :mod:`attnjax.training`."""
