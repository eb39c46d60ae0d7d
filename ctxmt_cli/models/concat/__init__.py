"""The ``concat`` family: sliding-window concatenation sKtoK / sKto1 (Lupo et al. 2022, 2023)."""
