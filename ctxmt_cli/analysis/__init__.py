"""Analyses of trained models: attention statistics, context usage (CXMI), training curves."""
