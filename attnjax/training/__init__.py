"""Training: device mesh and logical sharding, optimiser and loss, train state, sharded steps, Orbax checkpoints, the
loop. Nothing here knows a model beyond the interface of :mod:`attnjax.models.interface`, and nothing below the loop
names a mesh axis except through the logical axis rules of the config."""
