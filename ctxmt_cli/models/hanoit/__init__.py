"""The ``hanoit`` family: layer-wise context selection, monolingual and bilingual (Yang et al., HanoiT)."""
