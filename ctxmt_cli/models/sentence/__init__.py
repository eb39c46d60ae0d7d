"""The ``sentence`` family: the sentence-level Transformer (Vaswani et al. 2017), every other family's baseline."""
