// Placeholder until the module lands; replaced by its owner.
